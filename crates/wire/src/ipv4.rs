//! ipv4 (being written).
