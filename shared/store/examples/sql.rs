//! Prints a statement of the store's catalogue in the form it runs, composed statements
//! included: `cargo run -q -p rara-store --example sql -- fail`. Without a name, lists the
//! catalogue (name and parameter types).

fn main() {
    let catalogue = rara_store::sql::catalogue();
    match std::env::args().nth(1) {
        None => {
            for s in &catalogue {
                println!("{:<20} ({})", s.name, s.params.join(", "));
            }
        }
        Some(name) => match catalogue.iter().find(|s| s.name == name) {
            Some(s) => println!("{}", s.sql.trim()),
            None => {
                eprintln!("no statement {name:?}; run without arguments for the list");
                std::process::exit(2);
            }
        },
    }
}
