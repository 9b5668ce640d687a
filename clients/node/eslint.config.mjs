import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "src/generated/", "target/"] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    files: ["**/*.mjs"],
    languageOptions: {
      globals: { process: "readonly", console: "readonly", Buffer: "readonly", setTimeout: "readonly", URL: "readonly", fetch: "readonly", clearTimeout: "readonly" },
    },
  },
);
