use std::time::Instant;
use tessera_core::model::{check, ModelConfig};
use tessera_core::ProtocolVariant;

#[test]
fn probe() {
    let spec = std::env::var("PROBE").unwrap_or_default();
    for c in spec.split(';').filter(|c| !c.is_empty()) {
        let n: Vec<u64> = c.split(',').map(|x| x.parse().unwrap()).collect();
        let cfg = ModelConfig { devices: n[0] as usize, pages: n[1], values: n[2] as u8, requests_per_device: n[3] as u8, evictions_per_device: n[4] as u8, variant: ProtocolVariant::Correct };
        let t = Instant::now();
        let r = check(&cfg);
        println!("{c} {:?}: {}", t.elapsed(), r.to_string().lines().next().unwrap());
    }
}
