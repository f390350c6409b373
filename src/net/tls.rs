//! TLS for `pulsar+ssl://` service URLs, through rustls with the `ring` provider.
//!
//! By default the chain is verified against the given CA file (or the Mozilla roots when there
//! is none) and the broker's certificate must name the host it was reached by. The official
//! clients skip the name unless asked, which lets anyone holding a certificate from the same CA
//! impersonate any broker; `validate_hostname: false` restores that, for brokers reached through
//! addresses their certificates do not list.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, InconsistentKeys, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::NetError;

/// TLS settings of a client. They apply when the service URL is `pulsar+ssl://`.
///
/// `Debug` may print everything here: the key is named by its path, never held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM file of the CA certificates that sign broker certificates; `None` trusts the
    /// Mozilla root programme (webpki-roots).
    pub trust_certs_file: Option<PathBuf>,
    /// Accept any broker certificate. Encrypts, but does not authenticate the broker.
    pub allow_insecure_connection: bool,
    /// Require the broker's certificate to name the host it was reached by (default: true).
    pub validate_hostname: bool,
    /// PEM client certificate (chain) presented to a broker that asks for one (mutual TLS).
    pub certificate_file: Option<PathBuf>,
    /// PEM private key of `certificate_file` (PKCS#8, PKCS#1 or SEC1).
    pub private_key_file: Option<PathBuf>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            trust_certs_file: None,
            allow_insecure_connection: false,
            validate_hostname: true,
            certificate_file: None,
            private_key_file: None,
        }
    }
}

impl TlsOptions {
    /// Whether any file is named, so a typo is reported even on a plain `pulsar://` URL.
    pub fn names_files(&self) -> bool {
        self.trust_certs_file.is_some() || self.certificate_file.is_some() || self.private_key_file.is_some()
    }
}

/// Opens TLS sessions with one validated configuration; cheap to clone.
#[derive(Clone)]
pub struct TlsConnector {
    inner: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsConnector")
    }
}

impl TlsConnector {
    /// Reads the certificate and key files now, so a bad path fails when the client is made
    /// and not at the first connection.
    pub fn new(opts: &TlsOptions) -> Result<Self, NetError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match &opts.trust_certs_file {
            Some(path) => roots_from_file(path)?,
            None => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        let verifier: Arc<dyn ServerCertVerifier> = if opts.allow_insecure_connection {
            Arc::new(LenientVerifier {
                chain: None,
                provider: provider.clone(),
            })
        } else {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| config_err(format!("cannot build the certificate verifier: {e}")))?;
            if opts.validate_hostname {
                webpki
            } else {
                Arc::new(LenientVerifier {
                    chain: Some(webpki),
                    provider: provider.clone(),
                })
            }
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_err(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&opts.certificate_file, &opts.private_key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = certificates(cert, "client certificate")?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| config_err(format!("private key file {}: {}", key.display(), pem_reason(e))))?;
                let identity = client_identity(chain, key, &provider)?;
                builder.with_client_cert_resolver(Arc::new(SingleCertAndKey::from(identity)))
            }
            (Some(_), None) => {
                return Err(config_err(
                    "a client certificate file needs its private key file".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(config_err(
                    "a private key file needs its client certificate file".into(),
                ))
            }
        };
        Ok(TlsConnector {
            inner: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// Runs the TLS handshake over `tcp` with the broker at `addr` (`host:port`).
    pub async fn connect(&self, addr: &str, tcp: TcpStream) -> Result<TlsStream<TcpStream>, NetError> {
        self.connect_as(addr, host_of(addr), tcp).await
    }

    /// [`TlsConnector::connect`] expecting the certificate of `host` (which `addr` may not name).
    pub(crate) async fn connect_as(
        &self,
        addr: &str,
        host: &str,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, NetError> {
        let name = ServerName::try_from(host.to_string()).map_err(|e| NetError::Tls {
            addr: addr.to_string(),
            reason: format!("{host:?} is not a valid DNS name or IP address: {e}"),
        })?;
        self.inner.connect(name, tcp).await.map_err(|e| {
            tls_verdict(addr, &e).unwrap_or_else(|| NetError::Connect {
                addr: addr.to_string(),
                reason: if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "closed by the broker during the TLS handshake (is this port serving TLS?)".into()
                } else {
                    format!("during the TLS handshake: {e}")
                },
            })
        })
    }
}

/// rustls's verdict inside an I/O error (a refused certificate, an alert from the broker,
/// which TLS 1.3 may deliver only at the first read after the handshake). Those are final,
/// unlike the socket failing, which a retry may cure.
pub(crate) fn tls_verdict(addr: &str, e: &std::io::Error) -> Option<NetError> {
    let tls = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    let mut reason = tls.to_string();
    if matches!(
        tls,
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
        )
    ) {
        // Verification by name is on by default, so say how a deliberate mismatch gets through.
        reason.push_str(
            " (hostname verification: connect by a name the certificate lists, \
             or turn the check off with tls_validate_hostname=False)",
        );
    }
    Some(NetError::Tls {
        addr: addr.to_string(),
        reason,
    })
}

/// The host part of `host:port`, without the brackets of an IPv6 literal.
pub(crate) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// The client certificate and its key, checked to belong together where webpki can read the
/// certificate. rustls's own loader also refuses certificates webpki cannot parse, X.509 v1
/// among them; brokers accept those, and they are the broker's to judge, so they are
/// presented as they are.
fn client_identity(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, NetError> {
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| config_err(format!("cannot use the client private key: {e}")))?;
    let identity = CertifiedKey::new(chain, signing_key);
    match identity.keys_match() {
        Err(e @ rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => Err(config_err(format!(
            "client certificate and key do not go together: {e}"
        ))),
        _ => Ok(identity),
    }
}

fn config_err(reason: String) -> NetError {
    NetError::TlsConfig(reason)
}

fn pem_reason(e: rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(io) => io.to_string(),
        rustls_pki_types::pem::Error::NoItemsFound => "no PEM item of the expected kind in it".into(),
        other => format!("not valid PEM: {other}"),
    }
}

fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let bad = |reason: String| config_err(format!("{what} file {}: {reason}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(pem_reason(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_reason(e)))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(certs)
}

fn roots_from_file(path: &Path) -> Result<RootCertStore, NetError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path, "trust certificates")? {
        roots
            .add(cert)
            .map_err(|e| config_err(format!("trust certificates file {}: {e}", path.display())))?;
    }
    Ok(roots)
}

/// A verifier that checks less than webpki's: the chain and validity dates but not the name
/// (`chain` set: hostname validation off), or nothing (`allow_insecure_connection`). The
/// handshake signatures are still checked, which costs nothing and keeps the session bound to
/// the presented key.
#[derive(Debug)]
struct LenientVerifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for LenientVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            // webpki checks the name last, so this error means everything else passed.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    //! Against an in-process rustls server using `testdata/` (an EC CA; a server certificate
    //! for `DNS:localhost, IP:127.0.0.1`; a client certificate), made with the openssl CLI,
    //! valid until 2126; and an X.509 v1 client certificate with its key, signed by a throwaway CA.

    use std::path::PathBuf;

    use rustls::server::WebPkiClientVerifier;
    use rustls::ServerConfig;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    fn data(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("src/net/testdata")
            .join(name)
    }

    /// Serves one TLS session that writes `hi`; `client_ca` makes a client certificate mandatory.
    async fn serve_once(require_client_cert: bool) -> String {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let roots = roots_from_file(&data("ca.cert.pem")).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder
            .with_single_cert(
                certificates(&data("server.cert.pem"), "server").unwrap(),
                PrivateKeyDer::from_pem_file(data("server.key.pem")).unwrap(),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            if let Ok(mut tls) = acceptor.accept(tcp).await {
                let _ = tls.write_all(b"hi").await;
                let _ = tls.shutdown().await;
            }
        });
        addr
    }

    /// Connects as `host` and reads the server's greeting.
    async fn greet(opts: &TlsOptions, host: &str, require_client_cert: bool) -> Result<Vec<u8>, NetError> {
        let connector = TlsConnector::new(opts)?;
        let addr = serve_once(require_client_cert).await;
        let tcp = TcpStream::connect(&addr).await.unwrap();
        let mut tls = connector.connect_as(&addr, host, tcp).await?;
        let mut buf = vec![0u8; 2];
        tls.read_exact(&mut buf)
            .await
            .map_err(|e| NetError::Io(e.to_string()))?;
        Ok(buf)
    }

    fn trusting_ca() -> TlsOptions {
        TlsOptions {
            trust_certs_file: Some(data("ca.cert.pem")),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_trusted_ca_verifies_the_broker() {
        assert_eq!(greet(&trusting_ca(), "127.0.0.1", false).await.unwrap(), b"hi");
    }

    #[tokio::test]
    async fn the_default_roots_refuse_a_private_ca_for_good() {
        let err = greet(&TlsOptions::default(), "127.0.0.1", false).await.unwrap_err();
        assert!(
            matches!(&err, NetError::Tls { reason, .. } if reason.contains("UnknownIssuer")),
            "{err}"
        );
        assert!(!err.is_retriable());
    }

    #[tokio::test]
    async fn insecure_accepts_an_unknown_issuer() {
        let opts = TlsOptions {
            allow_insecure_connection: true,
            ..Default::default()
        };
        assert_eq!(greet(&opts, "other.example", false).await.unwrap(), b"hi");
    }

    #[tokio::test]
    async fn the_name_is_checked_unless_turned_off() {
        let strict = trusting_ca();
        assert!(strict.validate_hostname, "verification by name is the default");
        assert_eq!(greet(&strict, "localhost", false).await.unwrap(), b"hi");
        assert_eq!(greet(&strict, "127.0.0.1", false).await.unwrap(), b"hi");
        let err = greet(&strict, "other.example", false).await.unwrap_err();
        assert!(
            matches!(&err, NetError::Tls { reason, .. }
                if reason.contains("not valid for name \"other.example\"")
                    && reason.contains("tls_validate_hostname=False")),
            "{err}"
        );
        assert!(!err.is_retriable());
        // Off: the chain is still verified, the name is not.
        let chain_only = TlsOptions {
            validate_hostname: false,
            ..trusting_ca()
        };
        assert_eq!(greet(&chain_only, "other.example", false).await.unwrap(), b"hi");
    }

    #[tokio::test]
    async fn ignoring_the_name_still_refuses_an_untrusted_chain() {
        let chain_only = TlsOptions {
            validate_hostname: false,
            ..Default::default()
        };
        let err = greet(&chain_only, "other.example", false).await.unwrap_err();
        assert!(
            matches!(&err, NetError::Tls { reason, .. } if reason.contains("UnknownIssuer")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_client_certificate_is_presented_when_configured() {
        let mutual = TlsOptions {
            certificate_file: Some(data("client.cert.pem")),
            private_key_file: Some(data("client.key.pem")),
            ..trusting_ca()
        };
        assert_eq!(greet(&mutual, "127.0.0.1", true).await.unwrap(), b"hi");
        // TLS 1.3 reports a refused client only after the handshake, on the first read.
        assert!(greet(&trusting_ca(), "127.0.0.1", true).await.is_err());
    }

    #[test]
    fn an_x509_v1_client_certificate_loads_and_a_foreign_key_does_not() {
        let v1 = TlsOptions {
            certificate_file: Some(data("client.v1.cert.pem")),
            private_key_file: Some(data("client.v1.key.pem")),
            ..trusting_ca()
        };
        TlsConnector::new(&v1).expect("a v1 certificate is the broker's to judge");
        let mismatched = TlsOptions {
            certificate_file: Some(data("client.cert.pem")),
            private_key_file: Some(data("server.key.pem")),
            ..trusting_ca()
        };
        match TlsConnector::new(&mismatched) {
            Err(NetError::TlsConfig(m)) => assert!(m.contains("do not go together"), "{m}"),
            other => panic!("a key of another certificate was accepted: {other:?}"),
        }
    }

    #[test]
    fn bad_files_are_configuration_errors() {
        let missing = TlsOptions {
            trust_certs_file: Some(data("nope.pem")),
            ..Default::default()
        };
        let not_certs = TlsOptions {
            trust_certs_file: Some(data("server.key.pem")),
            ..Default::default()
        };
        let cert_only = TlsOptions {
            certificate_file: Some(data("client.cert.pem")),
            ..Default::default()
        };
        let key_is_not_a_key = TlsOptions {
            certificate_file: Some(data("client.cert.pem")),
            private_key_file: Some(data("client.cert.pem")),
            ..Default::default()
        };
        for (opts, needle) in [
            (missing, "nope.pem"),
            (not_certs, "no PEM certificate"),
            (cert_only, "needs its private key"),
            (key_is_not_a_key, "private key file"),
        ] {
            match TlsConnector::new(&opts) {
                Err(NetError::TlsConfig(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
                other => panic!("expected a configuration error for {opts:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_host_comes_from_the_address() {
        assert_eq!(host_of("broker-1:6651"), "broker-1");
        assert_eq!(host_of("[::1]:6651"), "::1");
        assert_eq!(host_of("h"), "h");
    }
}
