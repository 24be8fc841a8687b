//! The ONNX protobuf messages Baton reads, as hand-written `prost` structs.
//!
//! Field numbers and wire types follow the public ONNX format (`onnx.proto`, a proto2
//! file). Scalar fields are plain values rather than `Option`s: an absent field decodes to
//! its default, which is what every reader of ONNX assumes. Repeated numeric fields that
//! the format declares unpacked (`dims`, `floats`, `ints`) are encoded unpacked, so that
//! what this module writes is byte-for-byte what ONNX tools write; on decode, prost accepts
//! both the packed and the unpacked form of every repeated numeric field.
//!
//! Messages and fields Baton has no use for (functions, training info, sparse tensors,
//! quantization annotations, opaque types) are left out: prost skips unknown fields, so
//! models that carry them still decode.

/// A whole model: format version, operator sets and the main graph.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// Version of the ONNX IR the model was written against.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// The operator sets (domain, version) the graph's nodes refer to.
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    /// The tool that wrote the model.
    #[prost(string, tag = "2")]
    pub producer_name: String,
    /// The version of that tool.
    #[prost(string, tag = "3")]
    pub producer_version: String,
    /// Reverse-DNS namespace of the model.
    #[prost(string, tag = "4")]
    pub domain: String,
    /// The model's own version number.
    #[prost(int64, tag = "5")]
    pub model_version: i64,
    /// Free-form documentation.
    #[prost(string, tag = "6")]
    pub doc_string: String,
    /// The main graph.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    /// Named string properties.
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// One imported operator set: a domain (`""` is the default ONNX domain) and its version.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    /// The operator domain; empty or `"ai.onnx"` for the standard operators.
    #[prost(string, tag = "1")]
    pub domain: String,
    /// The operator set version.
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// A graph: nodes in topological order over named values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    /// The nodes, in topological order.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// The graph's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Constant tensors (weights), named by the values they define.
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// Free-form documentation.
    #[prost(string, tag = "10")]
    pub doc_string: String,
    /// The graph's inputs (which may include initializers in older IR versions).
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// The graph's outputs.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    /// Type and shape information for intermediate values, where known.
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

/// One operator application.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// Names of the input values; an empty name marks an omitted optional input.
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// Names of the output values; an empty name marks an unused optional output.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// The node's name (optional, for diagnostics).
    #[prost(string, tag = "3")]
    pub name: String,
    /// The operator, e.g. `"Conv"`.
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// The operator's attributes.
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    /// Free-form documentation.
    #[prost(string, tag = "6")]
    pub doc_string: String,
    /// The operator's domain; empty for the default ONNX domain.
    #[prost(string, tag = "7")]
    pub domain: String,
}

/// A named attribute value of a node. `type` says which of the value fields is meant.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// The attribute's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// A single float.
    #[prost(float, tag = "2")]
    pub f: f32,
    /// A single integer.
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// A single string, as bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    /// A single tensor.
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// A single graph (the bodies of `If`, `Loop`, `Scan`).
    #[prost(message, optional, tag = "6")]
    pub g: Option<GraphProto>,
    /// A list of floats.
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: Vec<f32>,
    /// A list of integers.
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: Vec<i64>,
    /// A list of strings, as bytes.
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    /// A list of tensors.
    #[prost(message, repeated, tag = "10")]
    pub tensors: Vec<TensorProto>,
    /// A list of graphs.
    #[prost(message, repeated, tag = "11")]
    pub graphs: Vec<GraphProto>,
    /// Free-form documentation.
    #[prost(string, tag = "13")]
    pub doc_string: String,
    /// A single type.
    #[prost(message, optional, tag = "14")]
    pub tp: Option<TypeProto>,
    /// A list of types.
    #[prost(message, repeated, tag = "15")]
    pub type_protos: Vec<TypeProto>,
    /// Which value field holds the attribute's value.
    #[prost(enumeration = "attribute_proto::AttributeType", tag = "20")]
    pub r#type: i32,
    /// Inside a function body: the name of the caller's attribute this one refers to.
    #[prost(string, tag = "21")]
    pub ref_attr_name: String,
}

/// Types nested in [`AttributeProto`].
pub mod attribute_proto {
    /// The kinds of attribute value.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum AttributeType {
        /// Not set.
        Undefined = 0,
        /// `f`.
        Float = 1,
        /// `i`.
        Int = 2,
        /// `s`.
        String = 3,
        /// `t`.
        Tensor = 4,
        /// `g`.
        Graph = 5,
        /// `floats`.
        Floats = 6,
        /// `ints`.
        Ints = 7,
        /// `strings`.
        Strings = 8,
        /// `tensors`.
        Tensors = 9,
        /// `graphs`.
        Graphs = 10,
        /// A sparse tensor (not read by Baton).
        SparseTensor = 11,
        /// A list of sparse tensors (not read by Baton).
        SparseTensors = 12,
        /// `tp`.
        TypeProto = 13,
        /// `type_protos`.
        TypeProtos = 14,
    }
}

/// A named value with its type, for graph inputs, outputs and intermediate values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    /// The value's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its type, where known.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
    /// Free-form documentation.
    #[prost(string, tag = "3")]
    pub doc_string: String,
}

/// The type of a value: a tensor type or one of the container types.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    /// The kind of type and its details.
    #[prost(oneof = "type_proto::Value", tags = "1, 4, 5, 8, 9")]
    pub value: Option<type_proto::Value>,
    /// An optional semantic tag (`"IMAGE"`, ...).
    #[prost(string, tag = "6")]
    pub denotation: String,
}

/// Types nested in [`TypeProto`].
pub mod type_proto {
    use super::{TensorShapeProto, TypeProto};

    /// The kinds of type.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// A dense tensor.
        #[prost(message, tag = "1")]
        TensorType(Tensor),
        /// A sequence of values of one type.
        #[prost(message, tag = "4")]
        SequenceType(Sequence),
        /// A map from a scalar key type to a value type.
        #[prost(message, tag = "5")]
        MapType(Map),
        /// A sparse tensor.
        #[prost(message, tag = "8")]
        SparseTensorType(SparseTensor),
        /// A value that may be absent.
        #[prost(message, tag = "9")]
        OptionalType(Optional),
    }

    /// A dense tensor type: element type and (possibly partial) shape.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tensor {
        /// The element type, a [`super::tensor_proto::DataType`] code.
        #[prost(int32, tag = "1")]
        pub elem_type: i32,
        /// The shape; absent when even the rank is unknown.
        #[prost(message, optional, tag = "2")]
        pub shape: Option<TensorShapeProto>,
    }

    /// A sequence type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sequence {
        /// The type of every element.
        #[prost(message, optional, boxed, tag = "1")]
        pub elem_type: Option<Box<TypeProto>>,
    }

    /// A map type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Map {
        /// The key type, a [`super::tensor_proto::DataType`] code.
        #[prost(int32, tag = "1")]
        pub key_type: i32,
        /// The value type.
        #[prost(message, optional, boxed, tag = "2")]
        pub value_type: Option<Box<TypeProto>>,
    }

    /// An optional type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Optional {
        /// The type of the value when present.
        #[prost(message, optional, boxed, tag = "1")]
        pub elem_type: Option<Box<TypeProto>>,
    }

    /// A sparse tensor type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SparseTensor {
        /// The element type, a [`super::tensor_proto::DataType`] code.
        #[prost(int32, tag = "1")]
        pub elem_type: i32,
        /// The shape.
        #[prost(message, optional, tag = "2")]
        pub shape: Option<TensorShapeProto>,
    }
}

/// A tensor shape whose dimensions may be fixed, named or unknown.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    /// The dimensions, outermost first.
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<tensor_shape_proto::Dimension>,
}

/// Types nested in [`TensorShapeProto`].
pub mod tensor_shape_proto {
    /// One dimension; `value` is `None` when the extent is unknown and unnamed.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dimension {
        /// The extent or its symbolic name.
        #[prost(oneof = "dimension::Value", tags = "1, 2")]
        pub value: Option<dimension::Value>,
        /// An optional semantic tag (`"DATA_BATCH"`, ...).
        #[prost(string, tag = "3")]
        pub denotation: String,
    }

    /// Types nested in [`Dimension`].
    pub mod dimension {
        /// A dimension's extent.
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            /// A fixed extent.
            #[prost(int64, tag = "1")]
            DimValue(i64),
            /// A symbolic extent, e.g. `"batch"`.
            #[prost(string, tag = "2")]
            DimParam(String),
        }
    }
}

/// A tensor value: shape, element type and the elements in one of several storage forms.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// Extents, outermost first; empty for a scalar.
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub dims: Vec<i64>,
    /// The element type, a [`tensor_proto::DataType`] code.
    #[prost(enumeration = "tensor_proto::DataType", tag = "2")]
    pub data_type: i32,
    /// For a tensor split over several messages: which part this one holds.
    #[prost(message, optional, tag = "3")]
    pub segment: Option<tensor_proto::Segment>,
    /// Elements of FLOAT (and COMPLEX64) tensors.
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// Elements of INT32, and widened elements of the narrower integer, bool and
    /// 16-bit float types (the latter as their bit patterns).
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    /// Elements of STRING tensors.
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: Vec<Vec<u8>>,
    /// Elements of INT64 tensors.
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    /// The tensor's name (the value it defines, for an initializer).
    #[prost(string, tag = "8")]
    pub name: String,
    /// The elements as dense little-endian bytes; when set, the typed fields are empty.
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    /// Elements of DOUBLE (and COMPLEX128) tensors.
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    /// Elements of UINT32 and UINT64 tensors.
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: Vec<u64>,
    /// Free-form documentation.
    #[prost(string, tag = "12")]
    pub doc_string: String,
    /// Where the elements are when `data_location` is EXTERNAL (`location`, `offset`,
    /// `length`, `checksum`).
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// Whether the elements are in this message or in an external file.
    #[prost(enumeration = "tensor_proto::DataLocation", tag = "14")]
    pub data_location: i32,
}

/// Types nested in [`TensorProto`].
pub mod tensor_proto {
    /// The ONNX element types. Only some have a Baton dtype; see
    /// [`crate::onnx_type_name`] for the names used in messages.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum DataType {
        /// Not set.
        Undefined = 0,
        /// 32-bit float.
        Float = 1,
        /// Unsigned 8-bit integer.
        Uint8 = 2,
        /// Signed 8-bit integer.
        Int8 = 3,
        /// Unsigned 16-bit integer.
        Uint16 = 4,
        /// Signed 16-bit integer.
        Int16 = 5,
        /// Signed 32-bit integer.
        Int32 = 6,
        /// Signed 64-bit integer.
        Int64 = 7,
        /// Byte string.
        String = 8,
        /// Boolean.
        Bool = 9,
        /// IEEE 754 half precision.
        Float16 = 10,
        /// 64-bit float.
        Double = 11,
        /// Unsigned 32-bit integer.
        Uint32 = 12,
        /// Unsigned 64-bit integer.
        Uint64 = 13,
        /// Complex of two 32-bit floats.
        Complex64 = 14,
        /// Complex of two 64-bit floats.
        Complex128 = 15,
        /// Brain float (8 exponent bits, 7 mantissa bits).
        Bfloat16 = 16,
        /// 8-bit float, 4 exponent bits, finite and NaN only.
        Float8e4m3fn = 17,
        /// 8-bit float, 4 exponent bits, no negative zero.
        Float8e4m3fnuz = 18,
        /// 8-bit float, 5 exponent bits.
        Float8e5m2 = 19,
        /// 8-bit float, 5 exponent bits, no negative zero.
        Float8e5m2fnuz = 20,
        /// Unsigned 4-bit integer, two per byte.
        Uint4 = 21,
        /// Signed 4-bit integer, two per byte.
        Int4 = 22,
        /// 4-bit float, 2 exponent bits, 1 mantissa bit.
        Float4e2m1 = 23,
        /// 8-bit exponent-only float (a power-of-two scale).
        Float8e8m0 = 24,
        /// Unsigned 2-bit integer, four per byte.
        Uint2 = 25,
        /// Signed 2-bit integer, four per byte.
        Int2 = 26,
    }

    /// Which part of a split tensor a message holds: elements `begin..end`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Segment {
        /// First element index.
        #[prost(int64, tag = "1")]
        pub begin: i64,
        /// One past the last element index.
        #[prost(int64, tag = "2")]
        pub end: i64,
    }

    /// Where a tensor's elements are stored.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum DataLocation {
        /// In the message itself (raw_data or a typed field).
        Default = 0,
        /// In a file named by `external_data`.
        External = 1,
    }
}

/// A key/value pair of strings.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    /// The key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The value.
    #[prost(string, tag = "2")]
    pub value: String,
}
