// Offline-verifiable audit bundles (issue 5, item 4): export a run, verify a bundle. Layout: docs/audit-bundle.md.
export { BundleExportError, exportBundle, type ExportBundleOptions, type ExportSummary } from './export.js';
export { describeFailure, verifyBundle, type BundleVerification, type VerifyBundleOptions } from './verify.js';
