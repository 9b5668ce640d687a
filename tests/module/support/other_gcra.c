/* A module that registers a GCRA command of its own: the stand-in for a
 * server that has one (Redis 8.8's milestone), so that a test can check
 * that redis-cell's opt-in GCRA leaves it alone. Written against the
 * module API's entry points directly, so no header is needed: the first
 * word of the load context is the server's GetApi function, as the
 * header's RedisModule_Init reads it. */
typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef int (*CommandFunc)(RedisModuleCtx *, RedisModuleString **, int);

static int (*GetApi)(const char *, void *);
static void (*SetModuleAttribs)(RedisModuleCtx *, const char *, int, int);
static int (*CreateCommand)(RedisModuleCtx *, const char *, CommandFunc, const char *, int, int, int);
static int (*ReplyWithSimpleString)(RedisModuleCtx *, const char *);

static int other_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    return ReplyWithSimpleString(ctx, "the other GCRA");
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    GetApi = (int (*)(const char *, void *))((void **)ctx)[0];
    if (GetApi("RedisModule_SetModuleAttribs", (void *)&SetModuleAttribs) != 0 ||
        GetApi("RedisModule_CreateCommand", (void *)&CreateCommand) != 0 ||
        GetApi("RedisModule_ReplyWithSimpleString", (void *)&ReplyWithSimpleString) != 0)
        return 1;
    SetModuleAttribs(ctx, "othergcra", 1, 1);
    return CreateCommand(ctx, "gcra", other_gcra, "write fast", 1, 1, 1);
}
