//! `fetch_url`: an HTTP(S) GET that cannot be pointed at this machine or its network, nor stall
//! the server.
//!
//! The URL is parsed by the WHATWG rules (so `http://2130706433/`, `http://0x7f.1/` and
//! `http://0177.0.0.1/` are all read as 127.0.0.1); its host is resolved, and every address
//! must be an ordinary global one: every block of IANA's special-purpose registries is refused,
//! and multicast, and IPv6 outside `2000::/3`; IPv4-mapped, NAT64 and 6to4 addresses are judged
//! by the IPv4 address they carry ([`addresses`]). Loopback passes only when the operator allows
//! it, for tests. The request then connects to exactly the addresses checked (no second DNS
//! lookup to rebind), redirects are followed by hand (at most 5), each checked the same way, and
//! the body is read up to a size limit, all within the call's time limit.
//!
//! HTML is turned into text by a real parser (html5ever, rendered by html2text) on a blocking
//! thread, never on the async workers, within the same time limit; the parser's work and the
//! tree's depth are capped ([`html`]), and when the call ends first (its timeout, an abort, a
//! shutdown) the conversion is told to stop and the call does not wait for it.

pub mod addresses;
pub mod html;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::Url;
use weft_tool_api::ToolError;

/// The most redirects followed.
const MAX_REDIRECTS: usize = 5;

/// How `fetch_url` behaves.
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    /// The largest body read, in bytes.
    pub max_bytes: usize,
    /// How long the whole fetch may take.
    pub timeout: Duration,
    /// Whether loopback addresses may be fetched (tests).
    pub allow_loopback: bool,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self { max_bytes: 1024 * 1024, timeout: Duration::from_secs(20), allow_loopback: false }
    }
}

pub use addresses::refused;

/// The addresses `url` may be fetched at, every one checked; `Err` says why not.
async fn check(url: &Url, policy: &FetchPolicy) -> Result<Vec<SocketAddr>, ToolError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::denied(format!(
            "{}: only http and https URLs can be fetched",
            url.scheme()
        )));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = match url.host() {
        None => return Err(ToolError::denied("the URL has no host")),
        Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(url::Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| ToolError::failed(format!("cannot resolve {name}: {e}")))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(ToolError::failed("the host resolves to no address"));
    }
    for addr in &addrs {
        if let Some(why) = refused(addr.ip(), policy.allow_loopback) {
            return Err(ToolError::denied(format!(
                "{} resolves to {}, {why}; fetch_url only fetches public addresses",
                url.host_str().unwrap_or_default(),
                addr.ip()
            )));
        }
    }
    Ok(addrs)
}

/// Fetches `url` and returns its text.
pub async fn fetch(url: &str, policy: &FetchPolicy) -> Result<String, ToolError> {
    tokio::time::timeout(policy.timeout, fetch_inner(url, policy)).await.unwrap_or_else(|_| {
        Err(ToolError::failed(format!(
            "the fetch took longer than {}",
            humantime::format_duration(policy.timeout)
        )))
    })
}

async fn fetch_inner(url: &str, policy: &FetchPolicy) -> Result<String, ToolError> {
    let mut url =
        Url::parse(url).map_err(|e| ToolError::invalid(format!("invalid URL {url:?}: {e}")))?;
    for _ in 0..=MAX_REDIRECTS {
        let addrs = check(&url, policy).await?;
        let host = url.host_str().unwrap_or_default().to_string();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .resolve_to_addrs(&host, &addrs)
            .build()
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let response = client
            .get(url.clone())
            .header("user-agent", "weft-fetch_url")
            .send()
            .await
            .map_err(|e| ToolError::failed(format!("fetching {url}: {e}")))?;
        if response.status().is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| ToolError::failed("a redirect without a Location"))?;
            url = url
                .join(location)
                .map_err(|e| ToolError::failed(format!("bad redirect {location:?}: {e}")))?;
            continue;
        }
        return read_body(response, policy).await;
    }
    Err(ToolError::failed(format!("more than {MAX_REDIRECTS} redirects")))
}

async fn read_body(
    mut response: reqwest::Response,
    policy: &FetchPolicy,
) -> Result<String, ToolError> {
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut body = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| ToolError::failed(e.to_string()))? {
        let room = policy.max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let is_html = content_type.contains("html");
    let is_text = is_html
        || content_type.is_empty()
        || content_type.starts_with("text/")
        || content_type.contains("json")
        || content_type.contains("xml");
    if !is_text {
        return Err(ToolError::failed(format!("the response is {content_type}, not text")));
    }
    let mut text = if is_html {
        html_to_text(body).await?
    } else {
        String::from_utf8_lossy(&body).into_owned()
    };
    if cut {
        text.push_str(&format!("\n[body truncated at {} bytes]", policy.max_bytes));
    }
    if !status.is_success() {
        return Err(ToolError::failed(format!("HTTP {status}: {text}")));
    }
    Ok(text)
}

/// [`html::to_text`] on a blocking thread; when this future is dropped (the call's timeout, an
/// abort) the conversion is told to stop, and nothing waits for it.
async fn html_to_text(body: Vec<u8>) -> Result<String, ToolError> {
    /// Sets the flag when dropped: the caller stopped waiting.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let flag = Arc::clone(&stop.0);
    let text = tokio::task::spawn_blocking(move || html::to_text(&body, &flag))
        .await
        .map_err(|e| ToolError::failed(format!("the HTML conversion failed: {e}")))?;
    drop(stop);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn private_and_special_addresses_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "ff02::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            assert!(refused(ip, false).is_some(), "{ip} was allowed");
        }
        for ip in ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"] {
            let ip: IpAddr = ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            assert_eq!(refused(ip, false), None, "{ip} was refused");
        }
        assert_eq!(refused(IpAddr::V4(Ipv4Addr::LOCALHOST), true), None);
        assert!(refused(IpAddr::V6(Ipv6Addr::LOCALHOST), false).is_some());
    }
}
