//! The local Unix socket listener.
//!
//! The socket lives in a directory the service owns (created `0700` if missing;
//! refused if another user owns it or others may write to it) and is made `0600`
//! before the first request is accepted. A socket file left by a dead process is
//! removed; a live one (something answers on it) or a path that is not a socket is
//! never touched, and starting fails with a message that says why.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use anyhow::{Context as _, bail};
use tokio::net::UnixListener;

/// Prepares `path` and binds a listener on it.
///
/// # Errors
/// When the directory is unsafe, the path is taken, or binding fails.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let meta = std::fs::metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        bail!(
            "socket directory {} belongs to uid {}, not to this user ({me})",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "socket directory {} is writable by others (mode {:o}); make it 0700",
            dir.display(),
            meta.mode() & 0o777
        );
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                bail!("{} is in use by a running process", path.display());
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing stale socket {}", path.display()))?;
        }
        Ok(_) => bail!(
            "{} exists and is not a socket; refusing to replace it",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stale_socket_is_replaced_live_one_and_files_are_not() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        let path = dir.path().join("hp.sock");
        let first = bind(&path).expect("bind");
        assert_eq!(
            std::fs::metadata(&path).expect("meta").mode() & 0o777,
            0o600
        );
        // Live: refused.
        assert!(bind(&path).is_err());
        drop(first);
        // Stale (file left, nobody listening): replaced.
        let again = bind(&path).expect("rebind over a stale socket");
        drop(again);
        // Not a socket: refused and left alone.
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(&path, b"precious").expect("write");
        assert!(bind(&path).is_err());
        assert_eq!(std::fs::read(&path).expect("read"), b"precious");
        // A directory others may write to: refused.
        let open = tempfile::tempdir().expect("tmp");
        std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        assert!(bind(&open.path().join("hp.sock")).is_err());
    }
}
