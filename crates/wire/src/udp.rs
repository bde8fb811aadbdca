//! udp (being written).
