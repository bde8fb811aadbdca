//! weft-lpm: IPv4 and IPv6 longest-prefix match for the router.
#![forbid(unsafe_code)]
