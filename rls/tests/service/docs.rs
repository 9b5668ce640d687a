//! docs/rls.md shows the example files exactly as the end-to-end test
//! runs them.

#[test]
fn the_docs_show_the_tested_files() {
    let root = crate::support::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/rls.md")).unwrap();
    let blocks: Vec<&str> = doc
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    for file in ["rls/examples/envoy.yaml", "rls/examples/config/edge.yaml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(
            blocks.contains(&text.as_str()),
            "docs/rls.md has no yaml block equal to {file}"
        );
    }
}
