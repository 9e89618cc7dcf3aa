# Host code lines per version of a halo workload (docs/EVALUATION.md, "Host code"):
#   awk -f docs/host_lines.awk crates/tessera-workloads/src/decomp/runner.rs
# A line counts for the innermost tag of the `// host: TAG begin` ... `// host: TAG end`
# markers around it (untagged lines: "common", every version runs them) when it holds code: neither blank nor only a comment. Code before an end
# marker on the same line (rustfmt puts some there) counts for the tag it closes.
function code(l) {
    sub(/\/\/.*$/, "", l)
    gsub(/[ \t]/, "", l)
    return l != ""
}
/\/\/ host: [a-z]+ begin/ { stack[++n] = $NF == "begin" ? $(NF - 1) : $3; next }
/\/\/ host: [a-z]+ end/ { if (n > 0 && code($0)) count[stack[n]]++; n--; next }
{ if (code($0)) count[n > 0 ? stack[n] : "common"]++ }
END { for (t in count) print t, count[t] }
