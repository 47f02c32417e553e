//! The Unix socket's local-user rule: a request without a token, on the socket,
//! from the uid that runs Holdpoint ([`LocalIdentity`]) is that machine's user.
//! The kernel names the peer (`SO_PEERCRED`, [`SocketPeer`]); a header never does.

use axum::serve::IncomingStream;
use holdpoint_domain::{OrgId, PersonId};
use tokio::net::UnixListener;

use crate::conn::Listener;

/// The machine's own user on the Unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalIdentity {
    /// The uid that runs Holdpoint; only it gets in without a token.
    pub uid: u32,
    /// That user's name (the person).
    pub person: PersonId,
    /// The organisation local requests act in.
    pub org: OrgId,
}

impl LocalIdentity {
    /// The identity of the effective user running this process, in `org`.
    ///
    /// # Errors
    /// When the user has no name or it is not a valid person id.
    pub fn current(org: OrgId) -> Result<Self, String> {
        let uid = nix::unistd::geteuid();
        let name = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_else(|| format!("uid-{uid}"));
        Ok(LocalIdentity {
            uid: uid.as_raw(),
            person: PersonId::parse(name).map_err(|e| e.to_string())?,
            org,
        })
    }
}

/// The peer of a Unix socket connection, from the kernel (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketPeer {
    /// The peer's uid, if the kernel told it.
    pub uid: Option<u32>,
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, Listener<UnixListener>>>
    for SocketPeer
{
    fn connect_info(stream: IncomingStream<'_, Listener<UnixListener>>) -> Self {
        SocketPeer {
            uid: stream.io().get_ref().peer_cred().ok().map(|c| c.uid()),
        }
    }
}
