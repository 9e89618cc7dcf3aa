use std::time::Instant;
use tessera_core::model::{check, ModelConfig};
use tessera_core::ProtocolVariant;

#[test]
fn probe() {
    for v in [ProtocolVariant::NoMemoryLock, ProtocolVariant::SkipInvalidation, ProtocolVariant::SkipWriteBackOnDowngrade] {
        let t = Instant::now();
        let r = check(&ModelConfig::minimum().with_variant(v));
        println!("{v:?} {:?}: {r}", t.elapsed());
    }
}
