// Compiled after the prelude into every pipeline but the tile path's: every invocation
// stamps the pages it translates itself (`stamp`).
fn first_in_group(page: u32) -> bool {
    return true;
}
