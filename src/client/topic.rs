//! Topic names: `persistent://tenant/namespace/local`, with the short forms the other clients
//! accept (`local` and `tenant/namespace/local` mean persistent topics in `public/default`).

use super::error::{Error, Result};

/// A validated, fully qualified topic name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicName {
    full: String,
    partition: Option<u32>,
}

const PARTITION_SUFFIX: &str = "-partition-";

impl TopicName {
    /// Parses and validates `name`.
    pub fn parse(name: &str) -> Result<TopicName> {
        let invalid = |why: &str| Error::invalid(format!("invalid topic name {name:?}: {why}"));
        if name.trim().is_empty() {
            return Err(invalid("empty"));
        }
        if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid("contains whitespace or control characters"));
        }
        let (domain, rest) = match name.split_once("://") {
            Some((d @ ("persistent" | "non-persistent"), rest)) => (d, rest.to_string()),
            Some((d, _)) => return Err(invalid(&format!("unknown domain {d:?}"))),
            None => {
                if name.contains('/') {
                    ("persistent", name.to_string())
                } else {
                    ("persistent", format!("public/default/{name}"))
                }
            }
        };
        let parts: Vec<&str> = rest.splitn(3, '/').collect();
        if parts.len() != 3 {
            return Err(invalid("expected tenant/namespace/topic"));
        }
        let (tenant, namespace, local) = (parts[0], parts[1], parts[2]);
        let name_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || "-=:._".contains(c));
        if !name_ok(tenant) || !name_ok(namespace) {
            return Err(invalid("tenant and namespace may use letters, digits and -=:._ only"));
        }
        if local.is_empty() || local.contains('/') {
            return Err(invalid("empty topic part or an extra '/'"));
        }
        let partition = local
            .rfind(PARTITION_SUFFIX)
            .and_then(|i| local[i + PARTITION_SUFFIX.len()..].parse::<u32>().ok());
        Ok(TopicName {
            full: format!("{domain}://{tenant}/{namespace}/{local}"),
            partition,
        })
    }

    /// The full name.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// The partition index when this names one partition.
    pub fn partition(&self) -> Option<u32> {
        self.partition
    }

    /// The name of partition `i` of this topic.
    pub fn partition_name(&self, i: u32) -> String {
        format!("{}{PARTITION_SUFFIX}{i}", self.full)
    }

    /// `tenant/namespace`.
    pub fn namespace(&self) -> &str {
        let rest = self.full.split_once("://").map_or(self.full.as_str(), |(_, r)| r);
        let cut = rest.rfind('/').unwrap_or(rest.len());
        &rest[..cut]
    }

    /// Whether the topic is persistent.
    pub fn is_persistent(&self) -> bool {
        self.full.starts_with("persistent://")
    }
}

impl std::fmt::Display for TopicName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.full)
    }
}

/// The partition index in a `...-partition-N` name, or -1.
pub(crate) fn topic_partition(topic: &str) -> i32 {
    topic
        .rsplit_once(PARTITION_SUFFIX)
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(-1)
}

/// The partitioned topic of a `...-partition-N` name (any other name as it is).
pub(crate) fn strip_partition(topic: &str) -> &str {
    match topic.rsplit_once(PARTITION_SUFFIX) {
        Some((base, n)) if n.parse::<u32>().is_ok() => base,
        _ => topic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_full_forms() {
        assert_eq!(TopicName::parse("t").unwrap().as_str(), "persistent://public/default/t");
        assert_eq!(TopicName::parse("a/b/t").unwrap().as_str(), "persistent://a/b/t");
        let p = TopicName::parse("non-persistent://a/b/t-partition-3").unwrap();
        assert_eq!(p.partition(), Some(3));
        assert!(!p.is_persistent());
        assert_eq!(p.namespace(), "a/b");
        assert_eq!(
            TopicName::parse("t").unwrap().partition_name(2),
            "persistent://public/default/t-partition-2"
        );
    }

    #[test]
    fn rejects_invalid_names() {
        for bad in [
            "",
            " ",
            "a b",
            "http://a/b/c",
            "a/b",
            "persistent://a/b/",
            "persistent://a/b/c/d",
            "a/b c/t",
            "x://",
        ] {
            assert!(TopicName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn partition_suffixes() {
        assert_eq!(topic_partition("persistent://a/b/t-partition-7"), 7);
        assert_eq!(topic_partition("persistent://a/b/t"), -1);
        assert_eq!(strip_partition("persistent://a/b/t-partition-7"), "persistent://a/b/t");
    }
}
