//! The catalogue of rule ids: every id an [`Error`](crate::Error) can
//! carry, each listed with its status and meaning in `docs/errors.md` (a
//! test keeps the two equal). An id is never renamed once shipped.

use std::fmt;

macro_rules! rules {
    ($($variant:ident = $id:literal,)*) => {
        /// A stable rule id (`docs/errors.md`), e.g. `surface.replace-uncovered`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Rule {
            $(
                #[doc = concat!("`", $id, "`")]
                $variant,
            )*
        }

        impl Rule {
            /// Every rule, in catalogue order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant),*];

            /// The id as it appears in error objects, e.g. `"zstd.frame-decode"`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Rule::$variant => $id,)*
                }
            }
        }
    };
}

rules! {
    JsonParse = "json.parse",
    JsonNotLossless = "json.not-lossless",
    JsonSurfaceMetadataNotLossless = "json.surface-metadata-not-lossless",
    HeaderNotLossless = "header.not-lossless",
    PersistMetaNotLossless = "persist.meta-not-lossless",
    PersistBatchNotLossless = "persist.batch-not-lossless",
    SeedEnvelopeKey = "seed.envelope-key",
    SeedEnvelopeInvalid = "seed.envelope-invalid",
    SeqSeedNotContiguous = "seq.seed-not-contiguous",
    SeqGap = "seq.gap",
    MsgUnidentified = "msg.unidentified",
    MsgRole = "msg.role",
    MsgSource = "msg.source",
    MsgContent = "msg.content",
    MsgModelSource = "msg.model-source",
    MsgToolSource = "msg.tool-source",
    MsgToolResultBlock = "msg.tool-result-block",
    MsgToolCallIdMismatch = "msg.tool-call-id-mismatch",
    HeaderLegacy = "header.legacy",
    HeaderLegacyFallback = "header.legacy-fallback",
    SeedHeaderProviderModel = "seed.header-provider-model",
    SeedHeaderReasoningEffort = "seed.header-reasoning-effort",
    SeedHeaderAdapterDefaults = "seed.header-adapter-defaults",
    HeaderNotRecord = "header.not-record",
    HeaderVersion = "header.version",
    HeaderIdMismatch = "header.id-mismatch",
    HeaderCreatedAt = "header.created-at",
    HeaderCwdType = "header.cwd-type",
    HeaderCwdNotAbsolute = "header.cwd-not-absolute",
    HeaderParentSession = "header.parent-session",
    HeaderSeedLength = "header.seed-length",
    HeaderOrigin = "header.origin",
    HeaderDelegationDepth = "header.delegation-depth",
    HeaderAgentPreset = "header.agent-preset",
    PersistMetaCreatedAt = "persist.meta-created-at",
    SurfaceOpOnNonSurface = "surface.op-on-non-surface",
    SurfaceSourcesOnNonSurface = "surface.sources-on-non-surface",
    SurfaceOpMissing = "surface.op-missing",
    SurfaceOpInvalid = "surface.op-invalid",
    SurfaceReplaceShape = "surface.replace-shape",
    SurfaceReplaceEndpointMissing = "surface.replace-endpoint-missing",
    SurfaceReplaceInverted = "surface.replace-inverted",
    SurfaceSourcesNotArray = "surface.sources-not-array",
    SurfaceSourcesEmpty = "surface.sources-empty",
    SurfaceSourceNotSeq = "surface.source-not-seq",
    SurfaceSourceDuplicate = "surface.source-duplicate",
    SurfaceSourceNotEarlier = "surface.source-not-earlier",
    SurfaceSourceUnknown = "surface.source-unknown",
    SurfaceReplaceUncovered = "surface.replace-uncovered",
    SurfaceToolResultRewriteArity = "surface.tool-result-rewrite-arity",
    SurfaceToolResultRewriteTarget = "surface.tool-result-rewrite-target",
    SurfaceToolResultRewrite = "surface.tool-result-rewrite",
    AppendReentrant = "append.reentrant",
    StoreDuplicateId = "store.duplicate-id",
    StoreAlreadyAttached = "store.already-attached",
    StoreAlreadyAnnounced = "store.already-announced",
    StoreNotLive = "store.not-live",
    ForkChildExists = "fork.child-exists",
    ForkSourceNotFound = "fork.source-not-found",
    ForkSourceNotLive = "fork.source-not-live",
    ForkBoundaryInvalid = "fork.boundary-invalid",
    ForkOutOfRange = "fork.out-of-range",
    ForkBoundaryMismatch = "fork.boundary-mismatch",
    ForkOpenTurn = "fork.open-turn",
    LoadNotFound = "load.not-found",
    LoadIdentityMismatch = "load.identity-mismatch",
    LoadVersionNewer = "load.version-newer",
    LoadVersionOlder = "load.version-older",
    LoadUnknownType = "load.unknown-type",
    LoadLegacyModeSet = "load.legacy-mode-set",
    LoadLegacyMalformedSteering = "load.legacy-malformed-steering",
    LoadLegacyMalformedTurnStart = "load.legacy-malformed-turn-start",
    LoadLegacyMalformedTurnEnd = "load.legacy-malformed-turn-end",
    LoadValidation = "load.validation",
    LoadLiveOpenTurn = "load.live-open-turn",
    LoadLivePrepare = "load.live-prepare",
    LoadCorruptUnparsable = "load.corrupt-unparsable",
    LoadCorruptSeqGap = "load.corrupt-seq-gap",
    LoadCorruptCommittedRow = "load.corrupt-committed-row",
    PersistExistsTracked = "persist.exists-tracked",
    PersistExistsStored = "persist.exists-stored",
    PersistAppendSeqMismatch = "persist.append-seq-mismatch",
    PersistReserved = "persist.reserved",
    PersistPublishOwned = "persist.publish-owned",
    PersistReservationLost = "persist.reservation-lost",
    PersistPreparationMismatch = "persist.preparation-mismatch",
    PersistLiveOwner = "persist.live-owner",
    PersistCollisionCwd = "persist.collision-cwd",
    PersistCollisionPrefix = "persist.collision-prefix",
    PersistCollisionOwner = "persist.collision-owner",
    PersistRawUnsupported = "persist.raw-unsupported",
    PersistFromSeqInvalid = "persist.from-seq-invalid",
    ConfigCacheSize = "config.cache-size",
    ConfigBatchDelay = "config.batch-delay",
    JsonlHeaderMissing = "jsonl.header-missing",
    JsonlHeaderNotJson = "jsonl.header-not-json",
    JsonlHeaderInvalid = "jsonl.header-invalid",
    JsonlHeaderRetiredFields = "jsonl.header-retired-fields",
    JsonlHeaderIdMismatch = "jsonl.header-id-mismatch",
    JsonlHeaderPathMismatch = "jsonl.header-path-mismatch",
    JsonlRawHeaderInvalid = "jsonl.raw-header-invalid",
    JsonlDuplicateId = "jsonl.duplicate-id",
    JsonlEncodingMismatch = "jsonl.encoding-mismatch",
    JsonlLegacyLayout = "jsonl.legacy-layout",
    JsonlExistsOnMaterialize = "jsonl.exists-on-materialize",
    JsonlEmptySegment = "jsonl.empty-segment",
    ZstdBadMagic = "zstd.bad-magic",
    ZstdReservedBit = "zstd.reserved-bit",
    ZstdReservedBlock = "zstd.reserved-block",
    ZstdHeaderFrame = "zstd.header-frame",
    ZstdHeaderFrameDecode = "zstd.header-frame-decode",
    ZstdFrameDecode = "zstd.frame-decode",
    ZstdTornRecordInFrame = "zstd.torn-record-in-frame",
    SqlitePathParent = "sqlite.path-parent",
    SqlitePathFile = "sqlite.path-file",
    SqliteSchemaUnversioned = "sqlite.schema-unversioned",
    SqliteSchemaVersion = "sqlite.schema-version",
    SqliteApplicationId = "sqlite.application-id",
    SqliteSchemaObjects = "sqlite.schema-objects",
    SqliteMutationAppId = "sqlite.mutation-app-id",
    SqliteMutationVersion = "sqlite.mutation-version",
    SqliteStoreId = "sqlite.store-id",
    SqliteRowSession = "sqlite.row-session",
    SqliteRowEvent = "sqlite.row-event",
    SqliteAppendSeqMismatch = "sqlite.append-seq-mismatch",
    SqliteAppendTornTail = "sqlite.append-torn-tail",
    SqliteMetadataMissing = "sqlite.metadata-missing",
    SqliteRepairStaleTail = "sqlite.repair-stale-tail",
    SqliteRepairOmittedTail = "sqlite.repair-omitted-tail",
    SqliteRepairStaleCloser = "sqlite.repair-stale-closer",
    SqliteBusy = "sqlite.busy",
    CodecTruncated = "codec.truncated",
    CodecNonCanonical = "codec.non-canonical",
    CodecVarintOverflow = "codec.varint-overflow",
    CodecSeqOutOfRange = "codec.seq-out-of-range",
    CodecEncodeInvalid = "codec.encode-invalid",
    CodecZstd = "codec.zstd",
    CodecUtf8 = "codec.utf8",
    CodecDataJson = "codec.data-json",
    RowPackedTag = "row.packed-tag",
    RowPackedSurfaceFields = "row.packed-surface-fields",
    RowEnvelope = "row.envelope",
    RowSeq0 = "row.seq0",
    RowTime0 = "row.time0",
    RowDataObject = "row.data-object",
    RowDataKeys = "row.data-keys",
    RowToolId = "row.tool-id",
    RowNumbers = "row.numbers",
    RowMembers = "row.members",
    RowDt = "row.dt",
    RowTooLarge = "row.too-large",
    RowSeqOverflow = "row.seq-overflow",
    RowTimeOverflow = "row.time-overflow",
    AdmitUnknownType = "admit.unknown-type",
    AdmitRetiredType = "admit.retired-type",
    AdmitSurfaceOpMissing = "admit.surface-op-missing",
    AdmitTurnShape = "admit.turn-shape",
    AdmitStepShape = "admit.step-shape",
    AdmitToolCallId = "admit.tool-call-id",
    AppendIgnorableKnown = "append.ignorable-known",
    ArgIgnorable = "arg.ignorable",
    ArgNull = "arg.null",
    ArgUtf8 = "arg.utf8",
    ArgNotObject = "arg.not-object",
    ArgNotArray = "arg.not-array",
    ArgIntent = "arg.intent",
    ArgBatch = "arg.batch",
    ArgBatchItem = "arg.batch-item",
    ArgId = "arg.id",
    ArgSeed = "arg.seed",
    ArgLegacy = "arg.legacy",
    ArgBoundary = "arg.boundary",
    ArgWindow = "arg.window",
    ArgOptionUnknown = "arg.option-unknown",
    ArgRepairOption = "arg.repair-option",
    ConfigInvalid = "config.invalid",
    ConfigEventType = "config.event-type",
    ConfigEventTypeReserved = "config.event-type-reserved",
    ConfigBackendNotBuilt = "config.backend-not-built",
    SqliteHeaderColumn = "sqlite.header-column",
    StoreClosed = "store.closed",
    HandleClosed = "handle.closed",
    StoreLocked = "store.locked",
    StoreReadOnly = "store.read-only",
    StoreNotFound = "store.not-found",
    HandlePoisoned = "handle.poisoned",
    StoreDeleteLive = "store.delete-live",
    InternalPanic = "internal.panic",
    InternalUntracked = "internal.untracked",
    InternalNoResult = "internal.no-result",
    InternalRepairCloser = "internal.repair-closer",
    QuarantineFull = "quarantine.full",
    OpenNotStreamable = "open.not-streamable",
    WindowNoSource = "window.no-source",
    WindowMessageText = "window.message-text",
    DeriveMessageText = "derive.message-text",
    WindowReloadMismatch = "window.reload-mismatch",
    ZstdContext = "zstd.context",
    IoOpen = "io.open",
    IoRead = "io.read",
    IoWrite = "io.write",
    IoFsync = "io.fsync",
    IoTruncate = "io.truncate",
    IoLink = "io.link",
    IoUnlink = "io.unlink",
    IoMkdir = "io.mkdir",
    IoReaddir = "io.readdir",
    IoStat = "io.stat",
    IoLock = "io.lock",
    IoNotADirectory = "io.not-a-directory",
    IoReadUnstable = "io.read-unstable",
    IoSqlite = "io.sqlite",
    SqlitePragmaJournalMode = "sqlite.pragma-journal-mode",
    SqlitePragmaSynchronous = "sqlite.pragma-synchronous",
    SqlitePragmaMmapSize = "sqlite.pragma-mmap-size",
    SqlitePragmaTrustedSchema = "sqlite.pragma-trusted-schema",
    SqlitePragmaLockingMode = "sqlite.pragma-locking-mode",
    SqliteCorrupt = "sqlite.corrupt",
    JsonlLink = "jsonl.link",
    PostgresConnect = "postgres.connect",
    PostgresQuery = "postgres.query",
    PostgresSchemaVersion = "postgres.schema-version",
    PostgresSchemaForeign = "postgres.schema-foreign",
    PostgresStoreId = "postgres.store-id",
    PostgresRowSession = "postgres.row-session",
    PostgresRowEvent = "postgres.row-event",
    PostgresAppendSeqMismatch = "postgres.append-seq-mismatch",
    PostgresSessionLocked = "postgres.session-locked",
    PostgresSessionMissing = "postgres.session-missing",
    PostgresTimeout = "postgres.timeout",
    ZstdDamagedFrame = "zstd.damaged-frame",
    CliNoStore = "cli.no-store",
    ConvertExists = "convert.exists",
    ConvertTornTail = "convert.torn-tail",
    RepairTornTail = "repair.torn-tail",
    RepairInterruptedTurn = "repair.interrupted-turn",
}

impl Rule {
    /// The rule whose id is `id`, if the catalogue has it.
    pub fn from_id(id: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|r| r.as_str() == id)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Rule {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Rule {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Rule> for &str {
    fn eq(&self, other: &Rule) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Rule> for str {
    fn eq(&self, other: &Rule) -> bool {
        self == other.as_str()
    }
}
