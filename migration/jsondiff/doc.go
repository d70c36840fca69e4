// Package jsondiff compares JSON values the way a migration comparison needs
// to, fast: a parser into a flat, reusable node slice (no allocation once
// warm), paths with wildcards (order.id, items[*].price), equality that
// ignores member order, compares numbers by value (optionally within a
// tolerance) and skips ignored paths, a field-level diff, and a canonical
// hash consistent with that equality.
//
// It has no dependencies beyond the standard library so that its fuzz
// target runs at full speed.
package jsondiff
