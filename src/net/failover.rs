//! Automatic cluster failover: which cluster's service URL the pool uses.
//!
//! A watcher probes the cluster in use every `check_interval` (a TCP connection to any of its
//! hosts, as the C++ client's `AutoClusterFailover` does). When the primary has been unreachable
//! for `failover_delay`, the first reachable secondary takes over; while a secondary is in use
//! the primary is probed too, and once it has been reachable for `switch_back_delay` it takes
//! over again (at once if the secondary itself is down). Secondaries are never probed while the
//! primary answers. A switch closes the pool's connections, so producers and consumers
//! reconnect, and look their topics up again, on the new cluster.

use std::sync::Weak;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::url::ServiceUrl;
use super::ConnectionPool;

/// The clusters and the timing of a failover client; the primary is the pool's first service URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverPolicy {
    /// Clusters to fall back on, in order of preference.
    pub secondaries: Vec<ServiceUrl>,
    /// Time between probes.
    pub check_interval: Duration,
    /// How long the cluster in use must stay unreachable before another is chosen.
    pub failover_delay: Duration,
    /// How long the primary must stay reachable before it is used again.
    pub switch_back_delay: Duration,
}

/// Whether any host of `service` accepts a TCP connection within `timeout`.
async fn reachable(service: &ServiceUrl, timeout: Duration) -> bool {
    for host in &service.hosts {
        if let Ok(Ok(_)) = tokio::time::timeout(timeout, TcpStream::connect(host.as_str())).await {
            return true;
        }
    }
    false
}

/// Probes and switches until the pool is gone or shut down.
pub async fn watch(pool: Weak<ConnectionPool>, primary: ServiceUrl, policy: FailoverPolicy) {
    let mut clusters = vec![primary];
    clusters.extend(policy.secondaries.iter().cloned());
    let mut current = 0;
    let mut failed_since: Option<Instant> = None;
    let mut recovered_since: Option<Instant> = None;
    loop {
        tokio::time::sleep(policy.check_interval).await;
        let Some(pool) = pool.upgrade().filter(|p| !p.is_shut_down()) else {
            return;
        };
        let timeout = pool
            .options()
            .connect_timeout
            .min(policy.check_interval.max(Duration::from_secs(1)));
        let now = Instant::now();
        let up = reachable(&clusters[current], timeout).await;
        if up {
            failed_since = None;
        }
        let down_too_long = !up && now - *failed_since.get_or_insert(now) >= policy.failover_delay;
        let next = if current == 0 {
            if !down_too_long {
                continue;
            }
            first_reachable(&clusters, 1.., timeout).await
        } else if reachable(&clusters[0], timeout).await {
            let since = *recovered_since.get_or_insert(now);
            (down_too_long || now - since >= policy.switch_back_delay).then_some(0)
        } else {
            recovered_since = None;
            if !down_too_long {
                continue;
            }
            let others: Vec<usize> = (1..clusters.len()).filter(|&i| i != current).collect();
            first_reachable_of(&clusters, &others, timeout).await
        };
        if let Some(next) = next {
            log::warn!(
                "cluster failover: switching from {:?} to {:?}",
                clusters[current].hosts,
                clusters[next].hosts
            );
            current = next;
            failed_since = None;
            recovered_since = None;
            pool.switch_to(next);
        }
    }
}

async fn first_reachable(
    clusters: &[ServiceUrl],
    range: std::ops::RangeFrom<usize>,
    timeout: Duration,
) -> Option<usize> {
    let candidates: Vec<usize> = (range.start..clusters.len()).collect();
    first_reachable_of(clusters, &candidates, timeout).await
}

async fn first_reachable_of(clusters: &[ServiceUrl], candidates: &[usize], timeout: Duration) -> Option<usize> {
    for &i in candidates {
        if reachable(&clusters[i], timeout).await {
            return Some(i);
        }
    }
    None
}
