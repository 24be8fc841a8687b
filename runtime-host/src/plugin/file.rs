//! Reading a plugin file before `dlopen`: its sha256 (the pin and the probe cache key) and
//! the first bytes the ELF check needs, in one streamed pass.

use std::path::Path;

/// How much of a plugin file's start the host keeps for the ELF check: the ELF header
/// and, where every linker writes it, the program header table right after it.
pub(super) const HEAD_BYTES: usize = 64 * 1024;

/// The hex sha256 of the file at `path`, its first [`HEAD_BYTES`] bytes and its
/// length. Read in chunks: a plugin library is often tens of megabytes, and holding it
/// whole for the hash once made the plugin load the peak of a run's resident memory.
pub(super) fn hash_file(path: &Path) -> std::io::Result<(String, Vec<u8>, u64)> {
    use sha2::Digest;
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut head = Vec::new();
    let mut chunk = vec![0u8; 256 * 1024];
    let mut len = 0u64;
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&chunk[..n]);
        let keep = HEAD_BYTES.saturating_sub(head.len()).min(n);
        head.extend_from_slice(&chunk[..keep]);
        len += n as u64;
    }
    let hash = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((hash, head, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::sha256_hex;

    #[test]
    fn a_plugin_file_is_hashed_in_chunks_as_a_whole() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0usize, 10, HEAD_BYTES, 3 * 256 * 1024 + 17] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let path = dir.path().join(format!("lib{len}.so"));
            std::fs::write(&path, &bytes).unwrap();
            let (hash, head, file_len) = hash_file(&path).unwrap();
            assert_eq!(hash, sha256_hex(&bytes), "{len}");
            assert_eq!(head, bytes[..len.min(HEAD_BYTES)], "{len}");
            assert_eq!(file_len, len as u64);
        }
    }
}
