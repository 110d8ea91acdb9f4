// Lint rules every change passes (CI runs `npm run lint`): typescript-eslint's recommended set,
// with the few exceptions this codebase makes on purpose, each said why.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  {ignores: ['dist/', 'out/', 'node_modules/', 'coverage/']},
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        URL: 'readonly',
        AbortController: 'readonly',
        AbortSignal: 'readonly',
        fetch: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
        structuredClone: 'readonly',
        performance: 'readonly',
        queueMicrotask: 'readonly',
        setImmediate: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', {argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none'}],
    },
  },
  {
    // The single binary's build helpers (scripts/build-binary.mjs): a Node single executable
    // application runs one CommonJS main script, and these files are bundled into it, so they
    // are CommonJS on purpose and load their modules with require().
    files: ['build/**/*.cjs'],
    languageOptions: {sourceType: 'commonjs', globals: {require: 'readonly', module: 'readonly', exports: 'readonly', __dirname: 'readonly'}},
    rules: {'@typescript-eslint/no-require-imports': 'off'},
  },
  {
    // Tests read the CLI's JSON output and hand-made objects: typing every one would add
    // nothing the assertions do not already check. ANSI escapes and the two-space indents of expected output are matched on purpose.
    files: ['test/**', 'bench/**'],
    rules: {'@typescript-eslint/no-explicit-any': 'off', 'no-control-regex': 'off', 'no-regex-spaces': 'off'},
  },
)
