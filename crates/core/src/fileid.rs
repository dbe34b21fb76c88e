//! A file's identity on disk, told apart from its name: the lock tells a lock file from its
//! successor by it, and the hash cache a model file from one put in its place (same size and
//! modification time, another file).

use std::fs::File;

/// A file's identity on Windows: its volume serial number and file id (the 128-bit id where the
/// file system gives one, else the 64-bit index, which NTFS's 128-bit id extends with zeros).
#[cfg(windows)]
pub(crate) fn of(file: &File) -> std::io::Result<(u64, [u8; 16])> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        FileIdInfo, GetFileInformationByHandle, GetFileInformationByHandleEx,
        BY_HANDLE_FILE_INFORMATION, FILE_ID_INFO,
    };
    let handle = file.as_raw_handle();
    let mut id = FILE_ID_INFO::default();
    // SAFETY: `handle` is open for as long as `file` is borrowed, and `id` is a FILE_ID_INFO of
    // the size passed.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            handle,
            FileIdInfo,
            (&mut id as *mut FILE_ID_INFO).cast(),
            std::mem::size_of::<FILE_ID_INFO>() as u32,
        )
    };
    if ok != 0 {
        return Ok((id.VolumeSerialNumber, id.FileId.Identifier));
    }
    let mut info = BY_HANDLE_FILE_INFORMATION::default();
    // SAFETY: as above, with a BY_HANDLE_FILE_INFORMATION.
    if unsafe { GetFileInformationByHandle(handle, &mut info) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&index.to_le_bytes());
    Ok((u64::from(info.dwVolumeSerialNumber), bytes))
}

/// A file's identity on Unix: its device and inode (the inode in the id's first 8 bytes).
#[cfg(unix)]
pub(crate) fn of(file: &File) -> std::io::Result<(u64, [u8; 16])> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata()?;
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&meta.ino().to_le_bytes());
    Ok((meta.dev(), bytes))
}

/// The file id folded into 64 bits (the hash cache's `inode` on Windows): NTFS's 128-bit id
/// extends its 64-bit index with zeros, so there this is that index.
#[cfg(any(windows, test))]
pub(crate) fn index(id: &[u8; 16]) -> u64 {
    let half = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    half(&id[..8]) ^ half(&id[8..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One file has one identity through every handle; another file has another, and a file
    /// renamed over a name keeps its own.
    #[test]
    fn a_file_keeps_its_identity_and_a_replacement_has_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"one").unwrap();
        std::fs::write(&b, b"two").unwrap();
        let id_a = of(&File::open(&a).unwrap()).unwrap();
        assert_eq!(of(&File::open(&a).unwrap()).unwrap(), id_a);
        let id_b = of(&File::open(&b).unwrap()).unwrap();
        assert_ne!(id_b, id_a);
        assert_ne!(index(&id_b.1), index(&id_a.1));
        std::fs::rename(&b, &a).unwrap();
        assert_eq!(of(&File::open(&a).unwrap()).unwrap(), id_b);
    }
}
