//! ipv6 (being written).
