//! Opening the link a device runs on.

use crate::context::{DeviceConfig, LinkKind};
use crate::Error;
use weft_link::DatagramLink;

pub(crate) fn open(cfg: &DeviceConfig) -> Result<Box<dyn DatagramLink>, Error> {
    match cfg.link {
        LinkKind::Udp | LinkKind::Shm => Err(Error::UnknownDevice(format!(
            "{:?} link not built yet",
            cfg.link
        ))),
    }
}
