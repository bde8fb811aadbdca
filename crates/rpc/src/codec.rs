//! The default codec: serde values as postcard bytes.
//!
//! Services made with [`crate::service!`] encode arguments and results with it; the
//! byte API ([`crate::Client::call`], [`crate::Service`]) skips it entirely. A value
//! the peer sent that does not decode is [`Code::InvalidArgument`] (at the server)
//! or [`Code::Internal`] (at the client: the server broke the contract).

use crate::status::{Code, Status};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Append `value`'s encoding to `out`.
pub fn encode<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), Status> {
    let v = std::mem::take(out);
    match postcard::to_extend(value, v) {
        Ok(v) => {
            *out = v;
            Ok(())
        }
        Err(e) => Err(Status::internal(format!("encoding failed: {e}"))),
    }
}

/// `value`'s encoding.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Status> {
    let mut v = Vec::new();
    encode(value, &mut v)?;
    Ok(v)
}

/// Decode a whole buffer into a `T`; failures carry `code`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], code: Code) -> Result<T, Status> {
    match postcard::from_bytes::<T>(bytes) {
        Ok(v) => Ok(v),
        Err(e) => Err(Status::new(code, format!("cannot decode: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let v = (String::from("/a/b"), 7u32, vec![1u64, 2, 3]);
        let b = to_vec(&v).unwrap();
        let back: (String, u32, Vec<u64>) = decode(&b, Code::InvalidArgument).unwrap();
        assert_eq!(back, v);
        let e = decode::<(String, u32)>(&[0xff, 0xff, 0xff], Code::InvalidArgument).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }
}
