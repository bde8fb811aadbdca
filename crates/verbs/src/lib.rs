//! weft-verbs: the RDMA verbs API over a software RNIC.
#![deny(unsafe_code)]
