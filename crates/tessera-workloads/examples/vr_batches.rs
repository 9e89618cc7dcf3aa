//! Prints OO_APP's batching of a scene: `cargo run -p tessera-workloads --example vr_batches
//! [MAP]` (an OpenArena map from the default pak directory; without one, the generated scene).
use tessera_scene::{Scene, DEFAULT_PAK_DIR};
use tessera_workloads::vr::{batch, objects_of};

fn main() {
    let scene = match std::env::args().nth(1) {
        Some(map) => match Scene::load_map(DEFAULT_PAK_DIR, &map) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        },
        None => Scene::generated(2),
    };
    let objects = match objects_of(&scene) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let batches = batch(&objects);
    let largest = batches.iter().map(|b| b.triangles).max().unwrap_or(0);
    let multi = batches.iter().filter(|b| b.objects.len() > 1).count();
    println!(
        "{}: {} triangles, {} textures, {} objects -> {} batches ({} of several objects, largest {} triangles)",
        scene.name,
        scene.triangles.len(),
        scene.textures.len(),
        objects.len(),
        batches.len(),
        multi,
        largest
    );
}
