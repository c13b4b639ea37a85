// Package layering has no code: its test keeps the package dependency rules
// of docs/design.md ("Packages") true as the code changes — pure packages
// stay pure, the cluster seam stays small, the report stays a contract.
package layering
