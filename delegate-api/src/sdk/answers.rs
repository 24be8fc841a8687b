//! The typed answers of a delegate: why it declines a node ([`Decline`], [`DeclineReason`])
//! and what it makes of a blob compiled earlier ([`BlobCompatibility`]).
//!
//! The ABI carries both as `u32` codes ([`abi::reason`], [`abi::compat`]) so that a C plugin
//! can give them. A Rust delegate builds them from these types instead, so it cannot hand
//! the host a code that does not exist, and one `Decline` type serves every delegate's
//! lowering (a lowering that fails returns the reason it would give the user).

use crate::abi;
use crate::sdk::Support;

/// Why a node is declined: the [`abi::reason`] codes other than `NONE`, as a type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeclineReason {
    /// The op is not implemented by this delegate.
    Op,
    /// An operand dtype is not supported.
    DType,
    /// A shape (rank, size, dynamic dimension) is outside what the delegate handles.
    Shape,
    /// An attribute value is not supported.
    Attribute,
    /// An operand the delegate needs constant is computed at run time.
    NotConstant,
    /// A resource limit (memory, buffer size) would be exceeded.
    Resource,
    /// Anything else; the message explains.
    Other,
}

impl DeclineReason {
    /// The ABI code ([`abi::reason`]).
    pub const fn code(self) -> u32 {
        match self {
            DeclineReason::Op => abi::reason::OP,
            DeclineReason::DType => abi::reason::DTYPE,
            DeclineReason::Shape => abi::reason::SHAPE,
            DeclineReason::Attribute => abi::reason::ATTRIBUTE,
            DeclineReason::NotConstant => abi::reason::NOT_CONSTANT,
            DeclineReason::Resource => abi::reason::RESOURCE,
            DeclineReason::Other => abi::reason::OTHER,
        }
    }

    /// The reason an ABI code stands for; `None` for `NONE` (supported) and for codes this
    /// build does not know (a newer plugin's), which hosts show as "other".
    pub const fn from_code(code: u32) -> Option<DeclineReason> {
        Some(match code {
            abi::reason::OP => DeclineReason::Op,
            abi::reason::DTYPE => DeclineReason::DType,
            abi::reason::SHAPE => DeclineReason::Shape,
            abi::reason::ATTRIBUTE => DeclineReason::Attribute,
            abi::reason::NOT_CONSTANT => DeclineReason::NotConstant,
            abi::reason::RESOURCE => DeclineReason::Resource,
            abi::reason::OTHER => DeclineReason::Other,
            _ => return None,
        })
    }

    /// Its short name in reports (`"dtype"`), as [`abi::reason::name`] gives it.
    pub fn name(self) -> &'static str {
        abi::reason::name(self.code())
    }
}

impl From<DeclineReason> for u32 {
    fn from(r: DeclineReason) -> u32 {
        r.code()
    }
}

/// A delegate's refusal of one node: what kind, and what exactly, for the user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({})", reason.name())]
pub struct Decline {
    /// The kind of refusal, so reports can group them.
    pub reason: DeclineReason,
    /// What is missing ("dtype f16", "auto_pad SAME_LOWER"), naming the node where useful.
    pub message: String,
}

impl Decline {
    /// A refusal for `reason`, explained by `message`.
    pub fn new(reason: DeclineReason, message: impl Into<String>) -> Decline {
        Decline {
            reason,
            message: message.into(),
        }
    }

    /// The answer [`Delegate::supports`](crate::sdk::Delegate::supports) gives for it.
    pub fn into_support(self) -> Support {
        Support::No(self)
    }
}

impl From<Decline> for Support {
    fn from(d: Decline) -> Support {
        d.into_support()
    }
}

/// Whether a blob compiled earlier (perhaps by another build, on another machine) can be
/// used: the [`abi::compat`] codes as a type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlobCompatibility {
    /// The blob runs as well as a fresh compile would.
    Optimal,
    /// The blob runs, but recompiling would do better (e.g. a newer kernel set).
    PreferRecompile,
    /// The blob cannot be used; recompile.
    Unsupported,
}

impl BlobCompatibility {
    /// The ABI code ([`abi::compat`]).
    pub const fn code(self) -> u32 {
        match self {
            BlobCompatibility::Optimal => abi::compat::OPTIMAL,
            BlobCompatibility::PreferRecompile => abi::compat::PREFER_RECOMPILE,
            BlobCompatibility::Unsupported => abi::compat::UNSUPPORTED,
        }
    }

    /// The answer an ABI code stands for; `None` for a code this build does not know.
    pub const fn from_code(code: u32) -> Option<BlobCompatibility> {
        Some(match code {
            abi::compat::OPTIMAL => BlobCompatibility::Optimal,
            abi::compat::PREFER_RECOMPILE => BlobCompatibility::PreferRecompile,
            abi::compat::UNSUPPORTED => BlobCompatibility::Unsupported,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_none_is_not_a_reason() {
        for r in [
            DeclineReason::Op,
            DeclineReason::DType,
            DeclineReason::Shape,
            DeclineReason::Attribute,
            DeclineReason::NotConstant,
            DeclineReason::Resource,
            DeclineReason::Other,
        ] {
            assert_eq!(DeclineReason::from_code(r.code()), Some(r));
        }
        assert_eq!(DeclineReason::from_code(abi::reason::NONE), None);
        for c in [
            BlobCompatibility::Optimal,
            BlobCompatibility::PreferRecompile,
            BlobCompatibility::Unsupported,
        ] {
            assert_eq!(BlobCompatibility::from_code(c.code()), Some(c));
        }
        let s = Decline::new(DeclineReason::DType, "f16").into_support();
        assert_eq!(s, Support::no(DeclineReason::DType, "f16"));
        assert_eq!(
            s,
            Support::No(Decline {
                reason: DeclineReason::DType,
                message: "f16".into()
            })
        );
    }
}
