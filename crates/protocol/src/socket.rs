//! Frames with file descriptors attached (SCM_RIGHTS): the daemon hands
//! each application the two view pages this way, so a client can map them
//! without any path in the file system that others could open.

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Most descriptors one frame carries (a kernel ring's: ring, data region,
/// doorbell).
const MAX_FDS: usize = 3;

/// Sends `bytes` with `fds` attached to the first byte. Blocks until all
/// bytes are written; the descriptors go with the first `sendmsg`.
pub fn send_with_fds(socket: impl AsFd, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let socket = socket.as_fd();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty()
        && (fds.len() > MAX_FDS || !control.push(SendAncillaryMessage::ScmRights(fds)))
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors for one frame",
        ));
    }
    let mut sent = sendmsg(
        socket,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    while sent < bytes.len() {
        let mut empty = SendAncillaryBuffer::default();
        let n = sendmsg(
            socket,
            &[IoSlice::new(&bytes[sent..])],
            &mut empty,
            SendFlags::NOSIGNAL,
        )?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        sent += n;
    }
    Ok(())
}

/// Reads what is available (at most `buf.len()` bytes) and any descriptors
/// that came with it. `Ok((0, _))` means the peer closed the connection.
pub fn recv_with_fds(socket: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        socket.as_fd(),
        &mut [IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = msg {
            fds.extend(received);
        }
    }
    Ok((got.bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn descriptor_arrives_with_the_bytes() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut file = std::fs::File::from(
            rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap(),
        );
        file.write_all(b"page").unwrap();
        send_with_fds(&a, b"hello", &[file.as_fd()]).unwrap();
        let mut buf = [0u8; 16];
        let (n, fds) = recv_with_fds(&b, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 1);
        let mut got = std::fs::File::from(fds.into_iter().next().unwrap());
        got.seek(SeekFrom::Start(0)).unwrap();
        let mut text = String::new();
        got.read_to_string(&mut text).unwrap();
        assert_eq!(text, "page");
    }
}
