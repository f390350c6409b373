//! Where a connection's credentials come from.
//!
//! A connection asks its [`AuthProvider`] for data when it sends `Connect` and again each time
//! the broker sends `AuthChallenge` (during the handshake, or later when the broker's refresh
//! check finds the credential expired), so a provider that can renew its credential (a token
//! file that is rewritten, a callable, an OAuth2 client) keeps a long-lived connection valid.
//! Providers that need the application (a Python callable) live above this layer and implement
//! the trait there.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use crate::protocol::pb::ServerError;

use super::NetError;

/// The credential data a provider hands over, once it has it.
pub type AuthFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, NetError>> + Send>>;

/// A source of credentials for the Pulsar `Connect` and `AuthResponse` commands.
pub trait AuthProvider: Send + Sync {
    /// The method name the broker's provider is registered under (`token`, `basic`, `tls`...).
    fn method(&self) -> &str;

    /// Fresh credential data. Called on every connect and every challenge; it may do I/O, so
    /// blocking work belongs on a blocking thread (`tokio::task::spawn_blocking`).
    fn auth_data(&self) -> AuthFuture;

    /// Whether asking again can give other data: a refused credential is worth one more
    /// attempt only then.
    fn renews(&self) -> bool {
        true
    }

    /// The broker refused the data last given: a provider that caches a credential (OAuth2)
    /// must not hand the same one out again. Called on an I/O thread, so it only takes note.
    fn refused(&self) {}
}

impl std::fmt::Debug for dyn AuthProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials end up in logs and panic messages: show the method only.
        write!(f, "AuthProvider({:?}, <redacted>)", self.method())
    }
}

/// The failure of a provider, as the broker's refusal would be: final, never retried.
pub fn provider_failed(method: &str, why: impl std::fmt::Display) -> NetError {
    NetError::Server {
        code: ServerError::AuthenticationError,
        message: format!("cannot get {method} credentials: {why}"),
    }
}

/// The same data every time (a token string, `user:password`, or nothing for `tls`, whose
/// credential is the client certificate of the TLS handshake).
pub struct StaticAuth {
    method: String,
    data: Vec<u8>,
}

impl StaticAuth {
    /// A provider that always answers `data` under `method`.
    pub fn new(method: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        StaticAuth {
            method: method.into(),
            data: data.into(),
        }
    }
}

impl AuthProvider for StaticAuth {
    fn method(&self) -> &str {
        &self.method
    }

    fn auth_data(&self) -> AuthFuture {
        let data = self.data.clone();
        Box::pin(async move { Ok(data) })
    }

    fn renews(&self) -> bool {
        false
    }
}

/// A token read from a file each time it is needed, so a token rotated on disk (a Kubernetes
/// projected secret, a sidecar's output) is picked up without a restart.
pub struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    /// A provider reading the token at `path` (surrounding white space is dropped).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        TokenFile { path: path.into() }
    }
}

impl AuthProvider for TokenFile {
    fn method(&self) -> &str {
        "token"
    }

    fn auth_data(&self) -> AuthFuture {
        let path = self.path.clone();
        Box::pin(async move {
            let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(&path).map_err(|e| (path, e)))
                .await
                .map_err(|e| provider_failed("token", e))?;
            match read {
                Ok(text) if !text.trim().is_empty() => Ok(text.trim().as_bytes().to_vec()),
                Ok(_) => Err(provider_failed("token", "the token file is empty")),
                Err((path, e)) => Err(provider_failed("token", format!("{}: {e}", path.display()))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_file_is_read_again_each_time() {
        let dir = std::env::temp_dir().join(format!("magnetar-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first\n").unwrap();
        let provider = TokenFile::new(&path);
        assert_eq!(provider.auth_data().await.unwrap(), b"first");
        std::fs::write(&path, "  second  ").unwrap();
        assert_eq!(provider.auth_data().await.unwrap(), b"second");
        std::fs::write(&path, "\n").unwrap();
        let empty = provider.auth_data().await.unwrap_err();
        assert!(empty.to_string().contains("empty"), "{empty}");
        std::fs::remove_file(&path).unwrap();
        let missing = provider.auth_data().await.unwrap_err();
        assert!(!missing.is_retriable());
        assert!(missing.to_string().contains("token"), "{missing}");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn debug_shows_the_method_only() {
        let p: Box<dyn AuthProvider> = Box::new(StaticAuth::new("basic", "user:secret"));
        let shown = format!("{p:?}");
        assert!(shown.contains("basic") && !shown.contains("secret"), "{shown}");
    }
}
