import js from "@eslint/js";
import tseslint from "typescript-eslint";

const node = {
  process: "readonly", console: "readonly", Buffer: "readonly", URL: "readonly", fetch: "readonly",
  setTimeout: "readonly", clearTimeout: "readonly",
};

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "src/generated/"] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  { files: ["**/*.mjs"], languageOptions: { globals: node } },
  {
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: { ...node, require: "readonly", module: "writable" } },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
  // NestJS modules are empty classes that decorators fill in.
  { files: ["tests/**"], rules: { "@typescript-eslint/no-extraneous-class": "off" } },
);
