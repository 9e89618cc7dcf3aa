# Counts host code lines per version tag: lines between `// host: TAG begin` and
# `// host: TAG end` (innermost tag wins), neither blank nor only a comment.
/\/\/ host: [a-z]+ begin/ { stack[++n] = $3; next }
/\/\/ host: [a-z]+ end/ { n--; next }
{
    line = $0
    sub(/^[ \t]+/, "", line)
    if (n > 0 && line != "" && line !~ /^\/\//) count[stack[n]]++
}
END { for (t in count) print t, count[t] }
