// `sqlx::migrate!` embeds `migrations/` at build time; rebuild when a migration is added or
// changed, or the binaries would carry the old set.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
