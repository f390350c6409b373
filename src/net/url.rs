//! Service URLs: `pulsar://host:port[,host:port...]` (TLS schemes are rejected until supported).

use super::NetError;

/// The parsed hosts of a service URL, tried in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceUrl {
    /// `host:port` strings, in the order given.
    pub hosts: Vec<String>,
}

impl ServiceUrl {
    /// Parses `pulsar://h1:6650,h2:6650`; a missing port defaults to 6650.
    pub fn parse(url: &str) -> Result<Self, NetError> {
        let invalid = |reason: &str| NetError::InvalidUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let rest = if let Some(r) = url.strip_prefix("pulsar://") {
            r
        } else if url.starts_with("pulsar+ssl://") {
            return Err(invalid("TLS (pulsar+ssl://) is not supported yet"));
        } else {
            return Err(invalid("must start with pulsar://"));
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
                None => format!("{part}:6650"),
            };
            hosts.push(host);
        }
        Ok(ServiceUrl { hosts })
    }
}

/// Turns a broker URL from a lookup answer (`pulsar://host:port`) into `host:port`.
pub fn broker_address(url: &str) -> Result<String, NetError> {
    Ok(ServiceUrl::parse(url)?.hosts.remove(0))
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
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "http://h:1",
            "pulsar://",
            "pulsar://h:notaport",
            "pulsar://:1",
            "pulsar://a:1,,b:2",
            "pulsar+ssl://h:6651",
        ] {
            assert!(ServiceUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
