//! Which Python logger an engine log record goes to: one per component, so
//! `logging.getLogger("magnetar.consumer").setLevel(logging.DEBUG)` turns on the consumers'
//! debug records and nothing else.
//!
//! | Python logger          | engine modules                                             |
//! |------------------------|------------------------------------------------------------|
//! | `magnetar.connection`  | `net` (connections, pool, lookup, TLS)                     |
//! | `magnetar.producer`    | `client::producer`, `client::partition_producer`           |
//! | `magnetar.consumer`    | `client::consumer`, `client::partition_consumer`, `inbox`  |
//! | `magnetar.client`      | the rest (reattach, timers, supervisor, dispatch, exit)    |
//!
//! pyo3-log turns `::` into `.`, so these targets are the logger names.

/// The target (logger) of a record from the engine module `target`.
pub fn component(target: &str) -> &'static str {
    let Some(rest) = target.strip_prefix("magnetar::") else {
        return "magnetar";
    };
    let first = |prefixes: &[&str]| prefixes.iter().any(|p| rest.starts_with(p));
    if first(&["net", "connection"]) {
        "magnetar::connection"
    } else if first(&["client::producer", "client::partition_producer", "producer"]) {
        "magnetar::producer"
    } else if first(&[
        "client::consumer",
        "client::partition_consumer",
        "client::inbox",
        "consumer",
    ]) {
        "magnetar::consumer"
    } else {
        "magnetar::client"
    }
}

#[cfg(test)]
mod tests {
    use super::component;

    #[test]
    fn modules_map_to_components() {
        assert_eq!(component("magnetar::net::connection::actor"), "magnetar::connection");
        assert_eq!(component("magnetar::net::pool"), "magnetar::connection");
        assert_eq!(
            component("magnetar::client::partition_producer::actor::settle"),
            "magnetar::producer"
        );
        assert_eq!(component("magnetar::producer"), "magnetar::producer");
        assert_eq!(
            component("magnetar::client::partition_consumer::receive"),
            "magnetar::consumer"
        );
        assert_eq!(component("magnetar::client::link"), "magnetar::client");
        assert_eq!(component("magnetar::python::dispatch"), "magnetar::client");
        assert_eq!(component("magnetar"), "magnetar");
    }
}
