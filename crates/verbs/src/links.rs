//! Opening the link a device runs on.

use crate::context::{DeviceConfig, LinkKind};
use crate::Error;
use weft_link::udp::{UdpLink, UdpOptions};
use weft_link::DatagramLink;

pub(crate) fn open(cfg: &DeviceConfig) -> Result<Box<dyn DatagramLink>, Error> {
    match cfg.link {
        LinkKind::Udp => Ok(Box::new(
            UdpLink::bind(cfg.addr, UdpOptions::default()).map_err(Error::Link)?,
        )),
        LinkKind::Shm => Err(Error::UnknownDevice("shm link not built yet".into())),
    }
}
