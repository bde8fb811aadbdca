//! arp (being written).
