//! Pseudo-terminals for interactive children (terminal sessions): a [`Pty`] pair opened in
//! the parent, the child given its terminal end as stdin, stdout and stderr, and
//! [`take_controlling_terminal`] called from the child's [`PreExec`](crate::PreExec) hook so
//! that the terminal is its controlling terminal (job control, `Ctrl-C` as `SIGINT`).
//!
//! The terminal is a new one, opened for this child: the session [`Contain`](crate::Contain)
//! gives every child stays without access to the parent's terminal. Containment is
//! unchanged: a pty does not let a process leave its cgroup or its supervisor.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A new pseudo-terminal: the parent's end ([`PtyMaster`]) and the child's end.
pub struct Pty {
    /// The parent's end: what the child writes is read here, what is written here is the
    /// child's input.
    pub master: PtyMaster,
    /// The child's end, to give it as stdin, stdout and stderr (close the parent's copy once
    /// the child started, so reads of the master end when the child's side is gone).
    pub slave: OwnedFd,
}

impl Pty {
    /// Opens a pseudo-terminal of `rows` × `cols` characters. Needs a Tokio runtime.
    pub fn open(rows: u16, cols: u16) -> io::Result<Pty> {
        // SAFETY: plain system calls on descriptors this function owns; the name buffer is
        // large enough and NUL-terminated by ptsname_r.
        unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            if master < 0 {
                return Err(io::Error::last_os_error());
            }
            let master = OwnedFd::from_raw_fd(master);
            if libc::grantpt(master.as_raw_fd()) != 0 || libc::unlockpt(master.as_raw_fd()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let mut name = [0 as libc::c_char; 128];
            let err = libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len());
            if err != 0 {
                return Err(io::Error::from_raw_os_error(err));
            }
            let slave = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if slave < 0 {
                return Err(io::Error::last_os_error());
            }
            let slave = OwnedFd::from_raw_fd(slave);
            let size = libc::winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size);
            let flags = libc::fcntl(master.as_raw_fd(), libc::F_GETFL);
            if flags < 0
                || libc::fcntl(master.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
            {
                return Err(io::Error::last_os_error());
            }
            // The descriptor is owned by the `OwnedFd` the `AsyncFd` owns: open, and the same,
            // for the whole life of the `AsyncFd`.
            let fd =
                AsyncFd::register_with_interest(master, Interest::READABLE | Interest::WRITABLE)
                    .map_err(|e| io::Error::other(e.to_string()))?;
            Ok(Pty {
                master: PtyMaster { fd },
                slave,
            })
        }
    }
}

/// The parent's end of a [`Pty`], read and written without blocking a thread.
pub struct PtyMaster {
    fd: AsyncFd<OwnedFd>,
}

impl std::fmt::Debug for PtyMaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtyMaster")
            .field("fd", &self.fd.get_ref().as_raw_fd())
            .finish()
    }
}

impl PtyMaster {
    /// Reads what the child wrote; `Ok(0)` once no process holds the terminal any more
    /// (Linux answers `EIO` then).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            let result = guard.try_io(|fd| {
                // SAFETY: reads into `buf`, which is valid for `buf.len()` bytes.
                let n = unsafe {
                    libc::read(fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match result {
                Ok(Ok(n)) => return Ok(n),
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `bytes` as the child's input (waiting while the terminal's buffer is
    /// full, as a typist would).
    pub async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let mut guard = self.fd.writable().await?;
            let result = guard.try_io(|fd| {
                // SAFETY: writes from `bytes`, valid for `bytes.len()` bytes.
                let n = unsafe {
                    libc::write(fd.get_ref().as_raw_fd(), bytes.as_ptr().cast(), bytes.len())
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match result {
                Ok(Ok(n)) => bytes = &bytes[n..],
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }
}

/// Makes the terminal on descriptor 0 the calling process's controlling terminal, leading a
/// session of its own first if it does not lead one (under a subreaper supervisor, the
/// supervisor leads the session [`Contain`](crate::Contain) made). For a
/// [`PreExec`](crate::PreExec) hook: only system calls, no allocation. Best effort: a child
/// without a controlling terminal still reads and writes the terminal, without job control.
pub fn take_controlling_terminal() {
    // SAFETY: system calls on the calling process only.
    unsafe {
        if libc::getsid(0) != libc::getpid() {
            libc::setsid();
        }
        libc::ioctl(0, libc::TIOCSCTTY, 0);
    }
}
