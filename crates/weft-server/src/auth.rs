//! Who is calling: bearer API keys mapped to owners, a rate limit per key, and a limit on wrong
//! keys per client address.
//!
//! With keys configured, every `/api/…` request needs `Authorization: Bearer KEY` (401
//! otherwise; the scheme is case-insensitive, RFC 9110 §11.1) and sees only its owner's
//! sessions, in its owner's namespace of session ids (see `ids`). Wrong keys are counted per
//! client address (an IPv6 address by its /64): past [`Settings::failed_keys_per_minute`] an
//! address gets 429 for every keyed request, right key or not, until its bucket refills, so keys
//! cannot be guessed at speed. Without keys there is one anonymous caller who sees every session,
//! and the server refuses to listen on anything but loopback.
//!
//! [`Settings::failed_keys_per_minute`]: crate::Settings::failed_keys_per_minute

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use weft_core::store::OwnerScope;

use crate::AppState;
use crate::error::ApiError;
use crate::ids::Namespace;

/// The caller of a request, put in the request's extensions by [`authenticate`].
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The key's owner; `None` when the server has no keys (every session is visible).
    pub(crate) owner: Option<String>,
    /// The owner's namespace of stored session ids (see `ids`).
    pub(crate) namespace: Namespace,
}

impl Caller {
    /// The caller of a request by `owner` (`None`: a server without keys).
    pub(crate) fn new(owner: Option<String>) -> Self {
        let namespace = Namespace::of(owner.as_deref());
        Self { owner, namespace }
    }

    /// The sessions this caller may see.
    pub(crate) fn scope(&self) -> OwnerScope<'_> {
        match &self.owner {
            Some(owner) => OwnerScope::Owner(owner),
            None => OwnerScope::Any,
        }
    }
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The owner of `key`, if it is one of `keys`. Every key is compared.
fn owner_of<'a>(
    keys: &'a std::collections::BTreeMap<String, String>,
    key: &str,
) -> Option<&'a str> {
    let mut found = None;
    for (candidate, owner) in keys {
        if same(candidate.as_bytes(), key.as_bytes()) {
            found = Some(owner.as_str());
        }
    }
    found
}

/// The credentials of an `Authorization` value with the `Bearer` scheme: the scheme matched
/// case-insensitively, then one or more spaces, then the token (RFC 9110 §11.1, RFC 6750 §2.1).
fn bearer(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim_matches([' ', '\t']);
    (!token.is_empty()).then_some(token)
}

/// Where wrong keys are counted: the client's IP address, an IPv6 address by its /64 (one
/// host usually has a whole /64); `None` when the connection's address is not known (a router
/// driven without [`Server::serve`](crate::Server::serve)).
fn client_bucket(request: &Request) -> Option<String> {
    let ConnectInfo(addr) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
    Some(match addr.ip().to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    })
}

/// Middleware for `/api/…`: resolves the caller and applies the rate limits.
pub(crate) async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let keys = &state.settings.api_keys;
    let (caller, bucket) = if keys.is_empty() {
        (Caller::new(None), String::new())
    } else {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        let Some(given) = given else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs an API key: send Authorization: Bearer KEY",
            ));
        };
        // An address that sent too many wrong keys has no key checked until its bucket refills:
        // a right key is refused too, or guessing could go on at full speed.
        let client = client_bucket(&request);
        if let Some(wait) = client.as_deref().and_then(|c| state.failed_keys.empty(c)) {
            return Err(failed_keys_limited(wait));
        }
        let Some(owner) = owner_of(keys, given) else {
            if let Some(client) = &client {
                let _ = state.failed_keys.take(client);
                tracing::warn!(client = %client, "a request with a wrong API key");
            }
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the API key is not valid",
            ));
        };
        // The bucket is per key; its name is the owner plus a key fingerprint, never the key.
        (Caller::new(Some(owner.to_string())), format!("{owner}/{}", fingerprint(given)))
    };
    state.limiter.admit(&bucket)?;
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(RateBucket(bucket));
    Ok(next.run(request).await)
}

/// The rate-limit bucket of a request's key (never the key itself), put in the request's
/// extensions by [`authenticate`]: the WebSocket counts its messages and streams against it.
#[derive(Debug, Clone)]
pub(crate) struct RateBucket(pub(crate) String);

fn failed_keys_limited(wait: u64) -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_failed_keys",
        format!("too many wrong API keys from this address; retry in {wait} s"),
    )
    .with_retry_after(wait)
}

/// A short non-secret name for a key (FNV-1a), so two keys of one owner get two buckets.
fn fingerprint(key: &str) -> String {
    let hash = key
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{:08x}", hash >> 32)
}

/// A token bucket per key: `burst` requests at once, refilled at `per_minute`.
pub(crate) struct RateLimiter {
    per_minute: u32,
    burst: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    pub(crate) fn new(per_minute: u32, burst: u32) -> Self {
        Self { per_minute, burst: burst.max(1), buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes a token for `key`: `None` when allowed, else the seconds to wait.
    pub(crate) fn take(&self, key: &str) -> Option<u64> {
        self.update(key, true)
    }

    /// Whether `key`'s bucket is empty (the seconds to wait), without taking a token.
    pub(crate) fn empty(&self, key: &str) -> Option<u64> {
        self.update(key, false)
    }

    fn update(&self, key: &str, take: bool) -> Option<u64> {
        if self.per_minute == 0 {
            return None;
        }
        let rate = f64::from(self.per_minute) / 60.0;
        let capacity = f64::from(self.burst);
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !take && !buckets.contains_key(key) {
            // A full bucket: nothing to look at, nothing to keep.
            return None;
        }
        if buckets.len() > 100_000 {
            // Forget full buckets, so that many keys cannot grow the map without bound.
            buckets
                .retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < capacity);
        }
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket { tokens: capacity, at: now });
        let refilled = bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = refilled.min(capacity);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            if take {
                bucket.tokens -= 1.0;
            }
            None
        } else {
            Some(((1.0 - bucket.tokens) / rate).ceil().max(1.0) as u64)
        }
    }

    /// Takes a token for `key`, or says how long to wait in a 429.
    pub(crate) fn admit(&self, key: &str) -> Result<(), ApiError> {
        match self.take(key) {
            None => Ok(()),
            Some(wait) => Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests for this API key; retry in {wait} s"),
            )
            .with_retry_after(wait)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_says_how_long_to_wait() {
        let limiter = RateLimiter::new(60, 3);
        assert_eq!((0..3).filter_map(|_| limiter.take("k")).count(), 0);
        assert_eq!(limiter.take("k"), Some(1));
        assert_eq!(limiter.take("other"), None, "buckets are per key");
        assert_eq!(RateLimiter::new(0, 1).take("k"), None, "0 is unlimited");
    }

    #[test]
    fn peeking_takes_no_token() {
        let limiter = RateLimiter::new(60, 1);
        assert_eq!(limiter.empty("k"), None);
        assert_eq!(limiter.take("k"), None);
        assert_eq!(limiter.empty("k"), Some(1));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer k-1", "bearer k-1", "BEARER k-1", "bEaReR   k-1", " Bearer k-1 "] {
            assert_eq!(bearer(value), Some("k-1"), "{value:?}");
        }
        for value in ["Bearerk-1", "Basic k-1", "Bearer ", "Bearer", "k-1"] {
            assert_eq!(bearer(value), None, "{value:?}");
        }
    }

    #[test]
    fn keys_map_to_owners() {
        let keys = [("key-one-1".to_string(), "alice".to_string())].into_iter().collect();
        assert_eq!(owner_of(&keys, "key-one-1"), Some("alice"));
        assert_eq!(owner_of(&keys, "key-one-2"), None);
        assert_eq!(owner_of(&keys, ""), None);
    }
}
