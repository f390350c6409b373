//! Service URLs: `pulsar://host:port[,host:port...]`, or `pulsar+ssl://` for TLS; `http://` and
//! `https://` name brokers' web services, which then answer lookups (`net::http`).

use super::NetError;

/// The parsed hosts of a service URL, tried in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceUrl {
    /// `host:port` strings, in the order given.
    pub hosts: Vec<String>,
    /// `pulsar+ssl://` or `https://`: every connection of the client is TLS.
    pub tls: bool,
    /// `http://` or `https://`: lookups go to the brokers' admin REST API.
    pub http: bool,
}

impl ServiceUrl {
    /// Parses `pulsar://h1:6650,h2:6650`; a missing port defaults to 6650 (6651 with
    /// `pulsar+ssl://`, 80 with `http://`, 443 with `https://`, as the official clients do).
    pub fn parse(url: &str) -> Result<Self, NetError> {
        let invalid = |reason: &str| NetError::InvalidUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let schemes = [
            ("pulsar://", false, false, 6650),
            ("pulsar+ssl://", true, false, 6651),
            ("http://", false, true, 80),
            ("https://", true, true, 443),
        ];
        let Some((rest, tls, http, default_port)) = schemes
            .iter()
            .find_map(|&(scheme, tls, http, port)| Some((url.strip_prefix(scheme)?, tls, http, port)))
        else {
            return Err(invalid("must start with pulsar://, pulsar+ssl://, http:// or https://"));
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() {
            return Err(invalid("no host"));
        }
        let mut hosts = Vec::new();
        for part in rest.split(',') {
            let part = part.trim();
            if part.is_empty() || part.contains('/') {
                return Err(invalid("empty host or path in host list"));
            }
            let host = match part.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() => {
                    p.parse::<u16>().map_err(|_| invalid("port is not a number 0-65535"))?;
                    part.to_string()
                }
                Some(_) => return Err(invalid("empty host")),
                None => format!("{part}:{default_port}"),
            };
            hosts.push(host);
        }
        Ok(ServiceUrl { hosts, tls, http })
    }
}

/// Turns a broker URL from a lookup answer (`pulsar://host:port` or `pulsar+ssl://host:port`)
/// into `host:port`, refusing a scheme other than the client's (`tls`).
pub fn broker_address(url: &str, tls: bool) -> Result<String, NetError> {
    let mut parsed = ServiceUrl::parse(url)?;
    if parsed.tls != tls || parsed.http {
        return Err(NetError::UnexpectedResponse(format!(
            "the broker URL {url:?} is not {}",
            if tls { "pulsar+ssl://" } else { "pulsar://" }
        )));
    }
    Ok(parsed.hosts.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_multi_host_urls() {
        assert_eq!(
            ServiceUrl::parse("pulsar://127.0.0.1:6650").unwrap().hosts,
            vec!["127.0.0.1:6650"]
        );
        assert_eq!(
            ServiceUrl::parse("pulsar://a:1,b:2/").unwrap().hosts,
            vec!["a:1".to_string(), "b:2".to_string()]
        );
        assert_eq!(ServiceUrl::parse("pulsar://h").unwrap().hosts, vec!["h:6650"]);
        assert!(!ServiceUrl::parse("pulsar://h").unwrap().tls);
    }

    #[test]
    fn parses_tls_urls_with_their_default_port() {
        let u = ServiceUrl::parse("pulsar+ssl://a,b:7000/").unwrap();
        assert!(u.tls);
        assert_eq!(u.hosts, vec!["a:6651".to_string(), "b:7000".to_string()]);
    }

    #[test]
    fn parses_web_service_urls_with_their_default_ports() {
        let u = ServiceUrl::parse("http://a,b:8080").unwrap();
        assert!(u.http && !u.tls);
        assert_eq!(u.hosts, vec!["a:80".to_string(), "b:8080".to_string()]);
        let u = ServiceUrl::parse("https://a/").unwrap();
        assert!(u.http && u.tls);
        assert_eq!(u.hosts, vec!["a:443".to_string()]);
    }

    #[test]
    fn broker_address_must_match_the_clients_scheme() {
        assert_eq!(broker_address("pulsar+ssl://b:6651", true).unwrap(), "b:6651");
        assert_eq!(broker_address("pulsar://b:6650", false).unwrap(), "b:6650");
        assert!(broker_address("pulsar://b:6650", true).is_err());
        assert!(broker_address("pulsar+ssl://b:6651", false).is_err());
        assert!(broker_address("http://b:8080", false).is_err());
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "ftp://h:1",
            "pulsar://",
            "pulsar://h:notaport",
            "pulsar://:1",
            "pulsar://a:1,,b:2",
            "pulsar+ssl://",
            "https://",
            "http://h:1/admin",
        ] {
            assert!(ServiceUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
