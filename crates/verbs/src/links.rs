//! Opening the link a device runs on.

use crate::context::{DeviceConfig, LinkKind};
use crate::Error;
use weft_link::shm::{ShmLink, ShmOptions};
use weft_link::udp::{UdpLink, UdpOptions};
use weft_link::DatagramLink;

pub(crate) fn open(cfg: &DeviceConfig) -> Result<Box<dyn DatagramLink>, Error> {
    Ok(match cfg.link {
        LinkKind::Udp => {
            Box::new(UdpLink::bind(cfg.addr, UdpOptions::default()).map_err(Error::Link)?)
        }
        LinkKind::Shm => {
            let opts = ShmOptions {
                icrc: cfg.icrc,
                ..ShmOptions::default()
            };
            Box::new(ShmLink::bind(cfg.addr, opts).map_err(Error::Link)?)
        }
    })
}
