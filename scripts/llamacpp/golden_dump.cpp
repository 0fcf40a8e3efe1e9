// docmem's reference dumper: links llama.cpp's libllama and prints, for one model,
//   tokenize MODEL FILE        token ids of FILE's text (no BOS, special tokens parsed)
//   greedy   MODEL N FILE      prompt ids (BOS as the model adds it), N greedy ids, then
//                              the top-20 (id, log-prob) at the last prompt position
//   top1     MODEL FILE        ids of the text (BOS as the model adds it) and the argmax
//                              next token after every position
// one result per line, numbers separated by spaces. Flash attention is off and threads
// are 2, so the numerics are llama.cpp's plain CPU path. Used by scripts/golden/lm.py.
#include "llama.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static std::string read_file(const char * path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special) {
    int n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_special, true);
    std::vector<llama_token> ids(std::max(n, 0));
    int got = llama_tokenize(vocab, text.data(), (int32_t) text.size(), ids.data(), (int32_t) ids.size(), add_special, true);
    ids.resize(std::max(got, 0));
    return ids;
}

static void print_ids(const std::vector<llama_token> & ids) {
    for (size_t i = 0; i < ids.size(); i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
}

static void quiet(ggml_log_level, const char *, void *) {}

// DOCMEM_TRACE=name: print the first values of every tensor with that name (debugging).
static bool trace(struct ggml_tensor * t, bool ask, void *) {
    const char * want = getenv("DOCMEM_TRACE");
    if (!want || strcmp(t->name, want) != 0) return ask ? want != nullptr && strcmp(t->name, want) == 0 : true;
    if (ask) return true;
    if (t->type != GGML_TYPE_F32) return true;
    fprintf(stderr, "%s [%lld %lld %lld %lld]:", t->name, (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3]);
    const float * d = (const float *) t->data;
    long long n = ggml_nelements(t);
    for (long long i = 0; i < n && i < 12; i++) fprintf(stderr, " %.6f", d[i]);
    if (const char * path = getenv("DOCMEM_TRACE_FILE")) {
        static int seen = 0;  // DOCMEM_TRACE_NTH: which occurrence of the name to write (0: first)
        const char * nth = getenv("DOCMEM_TRACE_NTH");
        if (seen++ != (nth ? atoi(nth) : 0)) return true;
        FILE * f = fopen(path, "w");
        for (long long i = 0; i < n; i++) fprintf(f, "%.9g\n", d[i]);
        fclose(f);
        return true;
    }
    if (getenv("DOCMEM_TRACE_ROWS")) {
        for (long long r = 0; r < 45 && r * t->ne[0] < n; r++) {
            fprintf(stderr, "\n  row %lld:", r);
            for (long long i = 0; i < 5; i++) fprintf(stderr, " %.9g", d[r * t->ne[0] + i]);
        }
    }
    fprintf(stderr, " ... last:");
    for (long long i = n > 6 ? n - 6 : 0; i < n; i++) fprintf(stderr, " %.6f", d[i]);
    fprintf(stderr, "\n");
    return true;
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s tokenize|greedy|top1 MODEL [N] FILE\n", argv[0]);
        return 2;
    }
    std::string mode = argv[1];
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[2]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    if (mode == "tokenize") {
        print_ids(tokenize(vocab, read_file(argv[3]), false));
        return 0;
    }
    const int n_gen = mode == "greedy" ? atoi(argv[3]) : 0;
    std::string text = read_file(argv[mode == "greedy" ? 4 : 3]);
    std::vector<llama_token> prompt = tokenize(vocab, text, true);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) (prompt.size() + n_gen + 16);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.flash_attn_type = getenv("DOCMEM_FA") ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (getenv("DOCMEM_TRACE")) { cp.cb_eval = trace; cp.cb_eval_user_data = nullptr; }
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create context\n"); return 1; }

    llama_batch batch = llama_batch_init((int32_t) prompt.size(), 0, 1);
    batch.n_tokens = (int32_t) prompt.size();
    for (size_t i = 0; i < prompt.size(); i++) {
        batch.token[i] = prompt[i];
        batch.pos[i] = (llama_pos) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = mode == "top1" || i + 1 == prompt.size();
    }
    if (llama_decode(ctx, batch)) { fprintf(stderr, "decode failed\n"); return 1; }
    print_ids(prompt);

    auto argmax = [&](const float * l) { return (llama_token) (std::max_element(l, l + n_vocab) - l); };
    if (mode == "top1") {
        std::vector<llama_token> top;
        for (size_t i = 0; i < prompt.size(); i++) top.push_back(argmax(llama_get_logits_ith(ctx, (int32_t) i)));
        print_ids(top);
        return 0;
    }
    // Top-20 log-probabilities at the last prompt position.
    const float * l = llama_get_logits_ith(ctx, -1);
    double mx = *std::max_element(l, l + n_vocab), z = 0;
    for (int i = 0; i < n_vocab; i++) z += std::exp((double) l[i] - mx);
    std::vector<int> order(n_vocab);
    for (int i = 0; i < n_vocab; i++) order[i] = i;
    std::partial_sort(order.begin(), order.begin() + 20, order.end(), [&](int a, int b) { return l[a] > l[b]; });
    std::vector<llama_token> gen;
    llama_token next = argmax(l);
    for (int k = 0; k < 20; k++) printf(k ? " %d:%.6f" : "%d:%.6f", order[k], (double) l[order[k]] - mx - std::log(z));
    printf("\n");
    for (int step = 0; step < n_gen; step++) {
        gen.push_back(next);
        if (llama_vocab_is_eog(vocab, next)) break;
        llama_batch one = llama_batch_get_one(&next, 1);
        if (llama_decode(ctx, one)) { fprintf(stderr, "decode failed\n"); return 1; }
        next = argmax(llama_get_logits_ith(ctx, -1));
    }
    print_ids(gen);
    return 0;
}
