//! checksum (being written).
