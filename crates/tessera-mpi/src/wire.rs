//! The messages between nodes, postcard-encoded.

use serde::{Deserialize, Serialize};

/// A command from a home to the worker of the node that holds `device`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmd {
    /// Reply with the device's copy of the page.
    Read {
        device: u16,
        page: u64,
    },
    /// Put data in a fresh slot (not mapped yet).
    Fill {
        device: u16,
        page: u64,
        data: Vec<u32>,
    },
    Install {
        device: u16,
        page: u64,
        writable: bool,
    },
    Invalidate {
        device: u16,
        page: u64,
    },
    SetWritable {
        device: u16,
        page: u64,
        writable: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wire {
    /// A device's part of a batch, to the pages' home: (page, write).
    Part {
        device: u16,
        id: u64,
        pages: Vec<(u64, bool)>,
    },
    /// The home granted the device's part.
    Complete {
        device: u16,
    },
    /// The device's procedure ended: its memory lock at this home is released.
    Release {
        device: u16,
    },
    ReleaseAck {
        device: u16,
    },
    /// The device drops these pages (homed at the receiver).
    Evict {
        device: u16,
        pages: Vec<u64>,
    },
    EvictAck {
        device: u16,
    },
    Cmd {
        seq: u64,
        cmd: Cmd,
    },
    /// The worker did `seq`; a `Read` carries the data.
    Ack {
        seq: u64,
        data: Option<Vec<u32>>,
    },
    /// Every device of the sender finished round `round`.
    Done {
        round: u32,
    },
    /// The sender's home pages at the end: their checksum and how many differ from the
    /// reference; and the bytes it sent to other nodes, all and page data.
    Result {
        checksum: u64,
        mismatches: u64,
        bytes_sent: u64,
        page_bytes_sent: u64,
    },
    /// Litmus: the sender's part of run `run`'s outcome, to rank 0: its home variables'
    /// values and its threads' visible registers.
    Outcome {
        run: u32,
        mem: Vec<(u64, i32)>,
        regs: Vec<(u32, Vec<i32>)>,
    },
    Heartbeat,
    /// The sender found `node` lost and is stopping.
    Lost {
        node: u32,
    },
    Bye,
}

pub fn encode(w: &Wire) -> Vec<u8> {
    postcard::to_stdvec(w).expect("encoding into a vector cannot fail")
}

pub fn decode(bytes: &[u8]) -> Result<Wire, postcard::Error> {
    postcard::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_an_error() {
        let w = Wire::Cmd {
            seq: 9,
            cmd: Cmd::Fill {
                device: 3,
                page: 70_000,
                data: vec![1, u32::MAX, 0],
            },
        };
        assert_eq!(decode(&encode(&w)).unwrap(), w);
        assert!(decode(&[0xff, 0xff, 0xff]).is_err());
    }
}
