//! `testkit serve [REQUEST]`: starts servers on request and stops them all
//! when standard input closes. The requests are described in
//! `testkit::serve`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.split_first() {
        Some((verb, first)) if verb == "serve" => testkit::serve::run(first),
        _ => {
            eprintln!("usage: testkit serve [REQUEST]   (requests: see testkit/src/serve.rs)");
            std::process::exit(2);
        }
    }
}
