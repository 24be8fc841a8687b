//! Bytes a host keeps alive for an executable (ABI 1.2 `init_retained`).

/// The bytes of a blob, or of a constant, that the host keeps valid, readable and
/// unchanged until the executable made from them is dropped (the handle's `destroy`),
/// 64-byte aligned.
///
/// An executable may keep this (it is `Copy`) and read its packed weights straight from
/// the blob instead of copying them: a host that maps a program file then holds the
/// weights once, in the mapping. Keep it only inside the executable that
/// [`Delegate::init_retained`](super::Delegate::init_retained) returned, never in a
/// global or in another executable: the promise ends with that executable.
#[derive(Clone, Copy)]
pub struct RetainedBlob {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes are immutable for the executable's life, so reading them from any
// thread is sound; the type is a read-only view.
unsafe impl Send for RetainedBlob {}
// SAFETY: as above.
unsafe impl Sync for RetainedBlob {}

impl RetainedBlob {
    /// Wraps blob bytes the caller keeps alive, unchanged, for as long as the executable
    /// that will hold the result.
    ///
    /// # Safety
    /// `ptr` must point at `len` readable bytes (or `len` must be 0) that stay valid and
    /// unchanged until the executable built from them is dropped.
    pub unsafe fn new(ptr: *const u8, len: usize) -> RetainedBlob {
        RetainedBlob { ptr, len }
    }

    /// The bytes. The lifetime is tied to this value; the executable that holds it may
    /// rebuild the slice whenever it needs it.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `new`'s contract: valid and unchanged while the executable lives, and
        // this value lives inside it.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes' length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the blob is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for RetainedBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RetainedBlob({} bytes)", self.len)
    }
}
