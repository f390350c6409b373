//! Automatic cluster failover: which cluster's service URL the pool uses.
//!
//! A watcher probes the cluster in use every `check_interval` (a TCP connection to any of its
//! hosts, as the C++ client's `AutoClusterFailover` does; a TLS handshake through an SNI
//! proxy). When the primary has been unreachable for `failover_delay`, the first reachable
//! secondary takes over; while a secondary is in use
//! the primary is probed too, and once it has been reachable for `switch_back_delay` it takes
//! over again (at once if the secondary itself is down). Secondaries are never probed while the
//! primary answers. A switch closes the pool's connections, so producers and consumers
//! reconnect, and look their topics up again, on the new cluster.

use std::sync::Weak;
use std::time::Duration;

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
        let up = pool.reachable(current, timeout).await;
        if up {
            failed_since = None;
        }
        let down_too_long = !up && now - *failed_since.get_or_insert(now) >= policy.failover_delay;
        let next = if current == 0 {
            if !down_too_long {
                continue;
            }
            let secondaries: Vec<usize> = (1..clusters.len()).collect();
            first_reachable(&pool, &secondaries, timeout).await
        } else if pool.reachable(0, timeout).await {
            let since = *recovered_since.get_or_insert(now);
            (down_too_long || now - since >= policy.switch_back_delay).then_some(0)
        } else {
            recovered_since = None;
            if !down_too_long {
                continue;
            }
            let others: Vec<usize> = (1..clusters.len()).filter(|&i| i != current).collect();
            first_reachable(&pool, &others, timeout).await
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

/// The first of `candidates` (indexes of the pool's clusters) that is reachable.
async fn first_reachable(pool: &ConnectionPool, candidates: &[usize], timeout: Duration) -> Option<usize> {
    for &i in candidates {
        if pool.reachable(i, timeout).await {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::net::TcpListener;

    use super::*;
    use crate::net::ConnectionOptions;

    /// Accepts (and drops) connections on `listener`, counting them.
    fn serve(listener: TcpListener, count: Arc<AtomicUsize>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while listener.accept().await.is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        })
    }

    async fn until(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "{what} did not happen");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn fails_over_after_the_delay_and_switches_back() {
        let primary = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let secondary = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (p_addr, s_addr) = (primary.local_addr().unwrap(), secondary.local_addr().unwrap());
        let url = |a: std::net::SocketAddr| ServiceUrl::parse(&format!("pulsar://{a}")).unwrap();
        let (p_probes, s_probes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let p_task = serve(primary, p_probes.clone());
        serve(secondary, s_probes.clone());
        let pool = Arc::new(
            ConnectionPool::for_clusters(vec![url(p_addr), url(s_addr)], ConnectionOptions::default()).unwrap(),
        );
        let policy = FailoverPolicy {
            secondaries: vec![url(s_addr)],
            check_interval: Duration::from_millis(20),
            failover_delay: Duration::from_millis(100),
            switch_back_delay: Duration::from_millis(100),
        };
        tokio::spawn(watch(Arc::downgrade(&pool), url(p_addr), policy));

        until("probes of the primary", || p_probes.load(Ordering::SeqCst) >= 5).await;
        assert_eq!(pool.current_cluster(), 0);
        assert_eq!(
            s_probes.load(Ordering::SeqCst),
            0,
            "a secondary was probed while the primary was up"
        );

        p_task.abort(); // the listener goes with the task: connections are refused
        let down = Instant::now();
        until("the failover", || pool.current_cluster() == 1).await;
        assert!(
            down.elapsed() >= Duration::from_millis(100),
            "switched before the failover delay"
        );

        let back = TcpListener::bind(p_addr).await.unwrap();
        let up = Instant::now();
        serve(back, p_probes.clone());
        until("the switch back", || pool.current_cluster() == 0).await;
        assert!(
            up.elapsed() >= Duration::from_millis(100),
            "switched back before the delay"
        );

        pool.shut_down();
    }
}
