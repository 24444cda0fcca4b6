/*
 * topo_xml.c - the small XML dialect of NCCL topology files: elements with attributes,
 * self-closing tags, comments and a `<?xml ...?>` prolog; no text content. The parser keeps
 * the line of every start tag so that topo.c can blame a line for a semantic error too; a
 * syntax error is reported as "<file>:<line>: <what>" with ncclInvalidArgument.
 *
 * The tree is the canonical form of a system: detection writes one, loading reads one, and
 * dumping prints the tree back, so load -> dump -> load is stable by construction.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "topo/topo.h"

/* ---- building ------------------------------------------------------------------------- */

static char* xml_strdup(const char* s, size_t n) {
  char* d = malloc(n + 1);
  if (d == NULL) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

ncclResult_t braid_topo_xml_new(struct braid_topo_xml* parent, const char* name, struct braid_topo_xml** x_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_xml* x = NULL;
  BRAID_CALLOC_GOTO(x, 1, res, err);
  x->name = xml_strdup(name, strlen(name));
  if (x->name == NULL) {
    BRAID_WARN("Failed to allocate an XML element name");
    res = ncclSystemError;
    goto err_free;
  }
  if (parent != NULL) {
    if (parent->nkids == parent->cap_kids) {
      int cap = parent->cap_kids ? 2 * parent->cap_kids : 4;
      struct braid_topo_xml** k = realloc(parent->kids, (size_t)cap * sizeof(*k));
      if (k == NULL) {
        BRAID_WARN("Failed to grow the children of XML element <%s>", parent->name);
        res = ncclSystemError;
        goto err_free;
      }
      parent->kids = k;
      parent->cap_kids = cap;
    }
    parent->kids[parent->nkids++] = x;
    x->parent = parent;
  }
  *x_p = x;
  return ncclSuccess;
err_free:
  free(x->name);
  free(x);
err:
  return res;
}

void braid_topo_xml_free(struct braid_topo_xml* x) {
  if (x == NULL) return;
  for (int i = 0; i < x->nkids; i++) braid_topo_xml_free(x->kids[i]);
  for (int i = 0; i < x->nattrs; i++) {
    free(x->attrs[i].name);
    free(x->attrs[i].value);
  }
  free(x->kids);
  free(x->attrs);
  free(x->name);
  free(x);
}

/* Set (or replace) an attribute from n bytes of value. */
static ncclResult_t xml_set_n(struct braid_topo_xml* x, const char* name, size_t nlen, const char* value, size_t vlen) {
  char* v = xml_strdup(value, vlen);
  if (v == NULL) goto err_nomem;
  for (int i = 0; i < x->nattrs; i++) {
    if (strlen(x->attrs[i].name) == nlen && strncmp(x->attrs[i].name, name, nlen) == 0) {
      free(x->attrs[i].value);
      x->attrs[i].value = v;
      return ncclSuccess;
    }
  }
  if (x->nattrs == x->cap_attrs) {
    int cap = x->cap_attrs ? 2 * x->cap_attrs : 8;
    struct braid_topo_xml_attr* a = realloc(x->attrs, (size_t)cap * sizeof(*a));
    if (a == NULL) goto err_free_v;
    x->attrs = a;
    x->cap_attrs = cap;
  }
  x->attrs[x->nattrs].name = xml_strdup(name, nlen);
  if (x->attrs[x->nattrs].name == NULL) goto err_free_v;
  x->attrs[x->nattrs].value = v;
  x->nattrs++;
  return ncclSuccess;
err_free_v:
  free(v);
err_nomem:
  BRAID_WARN("Failed to allocate attribute %.*s of XML element <%s>", (int)nlen, name, x->name);
  return ncclSystemError;
}

ncclResult_t braid_topo_xml_set(struct braid_topo_xml* x, const char* name, const char* value) {
  return xml_set_n(x, name, strlen(name), value, strlen(value));
}

ncclResult_t braid_topo_xml_setf(struct braid_topo_xml* x, const char* name, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return braid_topo_xml_set(x, name, buf);
}

const char* braid_topo_xml_get(const struct braid_topo_xml* x, const char* name) {
  for (int i = 0; i < x->nattrs; i++)
    if (strcmp(x->attrs[i].name, name) == 0) return x->attrs[i].value;
  return NULL;
}

int64_t braid_topo_xml_int(const struct braid_topo_xml* x, const char* name, int64_t def) {
  const char* s = braid_topo_xml_get(x, name);
  char* end = NULL;
  long long v;
  if (s == NULL || s[0] == '\0') return def;
  v = strtoll(s, &end, 0);
  if (end == s)
    BRAID_INFO(BRAID_LOG_GRAPH, "Topology XML line %d: <%s %s=\"%s\">: not a number, read as 0 (as NCCL does)", x->line,
               x->name, name, s);
  return end == s ? 0 : v;
}

double braid_topo_xml_float(const struct braid_topo_xml* x, const char* name, double def) {
  const char* s = braid_topo_xml_get(x, name);
  char* end = NULL;
  double v;
  if (s == NULL) return def;
  v = strtod(s, &end);
  return end == s ? 0.0 : v;
}

ncclResult_t braid_topo_xml_copy(struct braid_topo_xml* parent, const struct braid_topo_xml* x,
                                 struct braid_topo_xml** copy_p) {
  struct braid_topo_xml* c = NULL;
  BRAID_CHECK(braid_topo_xml_new(parent, x->name, &c));
  c->line = x->line;
  for (int i = 0; i < x->nattrs; i++) BRAID_CHECK(braid_topo_xml_set(c, x->attrs[i].name, x->attrs[i].value));
  for (int i = 0; i < x->nkids; i++) BRAID_CHECK(braid_topo_xml_copy(c, x->kids[i], NULL));
  if (copy_p) *copy_p = c;
  return ncclSuccess;
}

struct braid_topo_xml* braid_topo_xml_child(const struct braid_topo_xml* x, const char* name) {
  for (int i = 0; i < x->nkids; i++)
    if (strcmp(x->kids[i]->name, name) == 0) return x->kids[i];
  return NULL;
}

/* ---- parsing -------------------------------------------------------------------------- */

struct xml_parser {
  const char* p;    /* next character */
  const char* name; /* file name for messages */
  int line;
};

#define XML_FAIL(ps, ...)                                                     \
  do {                                                                        \
    char braid_msg_[256];                                                     \
    snprintf(braid_msg_, sizeof(braid_msg_), __VA_ARGS__);                    \
    BRAID_WARN("Topology XML %s:%d: %s", (ps)->name, (ps)->line, braid_msg_); \
    return ncclInvalidArgument;                                               \
  } while (0)

static void xml_skip_space(struct xml_parser* ps) {
  while (*ps->p && isspace((unsigned char)*ps->p)) {
    if (*ps->p == '\n') ps->line++;
    ps->p++;
  }
}

/* Skip until (and past) `end`, counting lines; 0 if the text ends first. */
static int xml_skip_past(struct xml_parser* ps, const char* end) {
  size_t n = strlen(end);
  while (*ps->p) {
    if (strncmp(ps->p, end, n) == 0) {
      ps->p += n;
      return 1;
    }
    if (*ps->p == '\n') ps->line++;
    ps->p++;
  }
  return 0;
}

static int xml_name_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == ':';
}

/* Decode the entities of an attribute value in place (anything else stays as written);
 * returns its new length. */
static int xml_unescape(char* s) {
  static const struct {
    const char* ent;
    char c;
  } ents[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
  char* w = s;
  for (char* r = s; *r;) {
    if (*r != '&') {
      *w++ = *r++;
      continue;
    }
    int done = 0;
    for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
      size_t n = strlen(ents[i].ent);
      if (strncmp(r, ents[i].ent, n) == 0) {
        *w++ = ents[i].c;
        r += n;
        done = 1;
        break;
      }
    }
    if (!done && r[1] == '#') {
      char* end = NULL;
      long c = r[2] == 'x' ? strtol(r + 3, &end, 16) : strtol(r + 2, &end, 10);
      if (end != NULL && *end == ';' && c > 0 && c <= 127) {
        *w++ = (char)c;
        r = end + 1;
        done = 1;
      }
    }
    if (!done) *w++ = *r++; /* NCCL reads values verbatim: a lone '&' stays */
  }
  *w = '\0';
  return (int)(w - s);
}

/* Attributes up to '>' or '/>'; sets *closed when the tag was self-closing. */
static ncclResult_t xml_parse_attrs(struct xml_parser* ps, struct braid_topo_xml* x, int* closed) {
  for (;;) {
    xml_skip_space(ps);
    if (*ps->p == '>') {
      ps->p++;
      *closed = 0;
      return ncclSuccess;
    }
    if (ps->p[0] == '/' && ps->p[1] == '>') {
      ps->p += 2;
      *closed = 1;
      return ncclSuccess;
    }
    if (!xml_name_char(*ps->p)) {
      if (*ps->p == '\0') XML_FAIL(ps, "end of file inside <%s>", x->name);
      XML_FAIL(ps, "unexpected '%c' in <%s>", *ps->p, x->name);
    }
    const char* an = ps->p;
    while (xml_name_char(*ps->p)) ps->p++;
    size_t alen = (size_t)(ps->p - an);
    xml_skip_space(ps);
    if (*ps->p != '=') XML_FAIL(ps, "attribute %.*s of <%s> has no '='", (int)alen, an, x->name);
    ps->p++;
    xml_skip_space(ps);
    char q = *ps->p;
    if (q != '"' && q != '\'') XML_FAIL(ps, "value of attribute %.*s of <%s> is not quoted", (int)alen, an, x->name);
    const char* v = ++ps->p;
    while (*ps->p && *ps->p != q) {
      if (*ps->p == '<') XML_FAIL(ps, "'<' inside attribute %.*s of <%s>", (int)alen, an, x->name);
      if (*ps->p == '\n') ps->line++;
      ps->p++;
    }
    if (*ps->p != q) XML_FAIL(ps, "unterminated value of attribute %.*s", (int)alen, an);
    char* val = xml_strdup(v, (size_t)(ps->p - v));
    if (val == NULL) XML_FAIL(ps, "out of memory");
    ps->p++;
    int vlen = xml_unescape(val), again = 0;
    for (int i = 0; i < x->nattrs; i++)
      again |= strlen(x->attrs[i].name) == alen && !strncmp(x->attrs[i].name, an, alen);
    if (again) { /* NCCL keeps both and reads the first */
      BRAID_INFO(BRAID_LOG_GRAPH, "Topology XML %s:%d: attribute %.*s repeated in <%s>, the first counts", ps->name,
                 ps->line, (int)alen, an, x->name);
      free(val);
      continue;
    }
    ncclResult_t res = xml_set_n(x, an, alen, val, (size_t)vlen);
    free(val);
    if (res != ncclSuccess) return res;
  }
}

/* The content of `parent` until its end tag (or the end of the text for the document). */
static ncclResult_t xml_parse_content(struct xml_parser* ps, struct braid_topo_xml* parent, int depth) {
  if (depth > 64) XML_FAIL(ps, "elements nested more than 64 deep");
  for (;;) {
    xml_skip_space(ps);
    if (*ps->p == '\0') {
      if (depth == 0) return ncclSuccess;
      XML_FAIL(ps, "end of file: <%s> (line %d) is not closed", parent->name, parent->line);
    }
    if (*ps->p != '<') XML_FAIL(ps, "unexpected text '%.16s'", ps->p);
    if (strncmp(ps->p, "<!--", 4) == 0) {
      int line = ps->line;
      ps->p += 4;
      if (!xml_skip_past(ps, "-->")) {
        ps->line = line;
        XML_FAIL(ps, "comment is not closed");
      }
      continue;
    }
    if (strncmp(ps->p, "<?", 2) == 0) {
      if (depth != 0) XML_FAIL(ps, "processing instruction inside <%s>", parent->name);
      if (!xml_skip_past(ps, "?>")) XML_FAIL(ps, "'<?' is not closed");
      continue;
    }
    if (ps->p[1] == '/') {
      const char* n = ps->p + 2;
      const char* e = n;
      while (xml_name_char(*e)) e++;
      if (depth == 0) XML_FAIL(ps, "end tag </%.*s> without a start tag", (int)(e - n), n);
      if ((size_t)(e - n) != strlen(parent->name) || strncmp(n, parent->name, (size_t)(e - n)) != 0)
        XML_FAIL(ps, "end tag </%.*s> does not match <%s> (line %d)", (int)(e - n), n, parent->name, parent->line);
      ps->p = e;
      xml_skip_space(ps);
      if (*ps->p != '>') XML_FAIL(ps, "end tag </%s> is not closed by '>'", parent->name);
      ps->p++;
      return ncclSuccess;
    }
    ps->p++;
    const char* n = ps->p;
    while (xml_name_char(*ps->p)) ps->p++;
    if (ps->p == n) XML_FAIL(ps, "'<' not followed by an element name");
    char name[64];
    if ((size_t)(ps->p - n) >= sizeof(name)) XML_FAIL(ps, "element name too long");
    memcpy(name, n, (size_t)(ps->p - n));
    name[ps->p - n] = '\0';
    struct braid_topo_xml* x = NULL;
    BRAID_CHECK(braid_topo_xml_new(parent, name, &x));
    x->line = ps->line;
    int closed = 0;
    BRAID_CHECK(xml_parse_attrs(ps, x, &closed));
    if (!closed) BRAID_CHECK(xml_parse_content(ps, x, depth + 1));
  }
}

ncclResult_t braid_topo_xml_parse(const char* text, const char* name, struct braid_topo_xml** root_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_xml* root = NULL;
  struct xml_parser ps = {text, name ? name : "(string)", 1};
  if (text == NULL) {
    BRAID_WARN("Topology XML %s: no text", ps.name);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_xml_new(NULL, "#document", &root));
  BRAID_CHECK_GOTO(xml_parse_content(&ps, root, 0), res, err_free);
  if (root->nkids == 0) {
    BRAID_WARN("Topology XML %s:%d: no element", ps.name, ps.line);
    res = ncclInvalidArgument;
    goto err_free;
  }
  *root_p = root;
  return ncclSuccess;
err_free:
  braid_topo_xml_free(root);
  return res;
}

ncclResult_t braid_topo_xml_read_file(const char* path, char** text_p) {
  ncclResult_t res = ncclSuccess;
  char* text = NULL;
  size_t len = 0, cap = 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    BRAID_WARN("Could not open topology file %s: %s", path, strerror(errno));
    return ncclInvalidArgument;
  }
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? 2 * cap : 65536;
      char* t = realloc(text, cap);
      if (t == NULL) {
        BRAID_WARN("Failed to allocate %zu bytes to read %s", cap, path);
        res = ncclSystemError;
        goto err_free;
      }
      text = t;
    }
    size_t n = fread(text + len, 1, 4096, f);
    len += n;
    if (n < 4096) break;
  }
  if (ferror(f)) {
    BRAID_WARN("Could not read topology file %s: %s", path, strerror(errno));
    res = ncclSystemError;
    goto err_free;
  }
  text[len] = '\0';
  fclose(f);
  *text_p = text;
  return ncclSuccess;
err_free:
  free(text);
  fclose(f);
  return res;
}

/* ---- printing ------------------------------------------------------------------------- */

struct xml_buf {
  char* s;
  size_t len, cap;
  int failed;
};

static void xml_put(struct xml_buf* b, const char* s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (b->len + n + 1 > cap) cap *= 2;
    char* t = realloc(b->s, cap);
    if (t == NULL) {
      b->failed = 1;
      return;
    }
    b->s = t;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void xml_puts(struct xml_buf* b, const char* s) {
  xml_put(b, s, strlen(s));
}

static void xml_put_escaped(struct xml_buf* b, const char* s) {
  for (; *s; s++) {
    switch (*s) {
      case '<':
        xml_puts(b, "&lt;");
        break;
      case '>':
        xml_puts(b, "&gt;");
        break;
      case '&':
        xml_puts(b, "&amp;");
        break;
      case '"':
        xml_puts(b, "&quot;");
        break;
      default:
        xml_put(b, s, 1);
    }
  }
}

static void xml_print_node(struct xml_buf* b, const struct braid_topo_xml* x, int depth) {
  for (int i = 0; i < depth; i++) xml_puts(b, "  ");
  xml_puts(b, "<");
  xml_puts(b, x->name);
  for (int i = 0; i < x->nattrs; i++) {
    xml_puts(b, " ");
    xml_puts(b, x->attrs[i].name);
    xml_puts(b, "=\"");
    xml_put_escaped(b, x->attrs[i].value);
    xml_puts(b, "\"");
  }
  if (x->nkids == 0) {
    xml_puts(b, "/>\n");
    return;
  }
  xml_puts(b, ">\n");
  for (int i = 0; i < x->nkids; i++) xml_print_node(b, x->kids[i], depth + 1);
  for (int i = 0; i < depth; i++) xml_puts(b, "  ");
  xml_puts(b, "</");
  xml_puts(b, x->name);
  xml_puts(b, ">\n");
}

ncclResult_t braid_topo_xml_print(const struct braid_topo_xml* root, char** text_p) {
  struct xml_buf b = {0};
  if (strcmp(root->name, "#document") == 0) {
    for (int i = 0; i < root->nkids; i++) xml_print_node(&b, root->kids[i], 0);
  } else {
    xml_print_node(&b, root, 0);
  }
  xml_puts(&b, "");
  if (b.failed || b.s == NULL) {
    free(b.s);
    BRAID_WARN("Failed to allocate the topology XML text (%zu bytes)", b.cap);
    return ncclSystemError;
  }
  *text_p = b.s;
  return ncclSuccess;
}
