public import NorqCore

extension NorqError.Code {
    // template: the push template language
    /// A path in `{{ }}` is not present in the data (strict mode).
    public static let templateMissingVariable: Self = "template/missing-variable"
    /// A pipe name that is not one of the 40 built-in pipes (strict mode).
    public static let templateUnknownPipe: Self = "template/unknown-pipe"
    /// A malformed expression, directive line or condition.
    public static let templateSyntaxError: Self = "template/syntax-error"
    /// A `:::` block that is never closed, or a `:::` / `:::else` without an open block.
    public static let templateUnbalancedBlock: Self = "template/unbalanced-block"
    /// A `::: name` directive that is not known.
    public static let templateUnknownDirective: Self = "template/unknown-directive"
    /// A pipe got arguments or an input it cannot work with.
    public static let templatePipeError: Self = "template/pipe-error"
    /// `{{> name}}` names a partial that does not exist (strict mode).
    public static let templateMissingPartial: Self = "template/missing-partial"
    /// A partial includes itself, directly or through others.
    public static let templateRecursivePartial: Self = "template/recursive-partial"
    /// Partials nested deeper than the limit.
    public static let templatePartialDepth: Self = "template/partial-depth"
    /// A rendered title, body or value is larger than the output limit.
    public static let templateOutputTooLarge: Self = "template/output-too-large"
    /// `::: each` loops ran more iterations than the limit in one render.
    public static let templateLoopLimit: Self = "template/loop-limit"
    /// The frontmatter is not valid YAML, or not a mapping.
    public static let templateInvalidFrontmatter: Self = "template/invalid-frontmatter"
    /// A template folder holds both `push.md` and `push.json`.
    public static let templateBothFormats: Self = "template/both-formats"
    /// No template of that name, or a folder without `push.md` / `push.json`.
    public static let templateNotFound: Self = "template/not-found"
    /// The templates directory does not exist or cannot be read.
    public static let templateMissingDirectory: Self = "template/missing-directory"
    /// `data.samples.yaml` is not a mapping of sample names to data.
    public static let templateInvalidSamples: Self = "template/invalid-samples"
    /// `tests.yaml` is malformed, or a test names an unknown sample or target.
    public static let templateInvalidTests: Self = "template/invalid-tests"
    /// Warning: `{{{raw}}}` skips escaping (Norq's lint rule; push output is plain text either way).
    public static let templateRawExpression: Self = "template/raw-expression"
    /// Data (a sample, `--data`, a send's data) does not match `data.schema.yaml`.
    public static let templateDataSchema: Self = "template/data-schema"
    /// `data.schema.yaml` is not a schema this router understands (see docs/templates.md).
    public static let templateInvalidSchema: Self = "template/invalid-schema"
    /// Warning: a template uses a nullable schema field (not in `required`) without a guard
    /// (`::: if field`, `| default ...`).
    public static let templateNullableAccess: Self = "template/nullable-access"
    /// A Norq template id is malformed: more than 4 segments, a first segment other than system,
    /// transactional or promotional, or a segment that is not `[a-z0-9]+(-[a-z0-9]+)*`.
    public static let templateInvalidID: Self = "template/invalid-id"
    /// `::: each` over a value that is not a list (strict mode).
    public static let templateNotAList: Self = "template/not-a-list"

    // push: frontmatter (NorqTemplates)
    public static let unknownIOSKey: Self = "push/unknown-ios-key"
    public static let unknownAndroidKey: Self = "push/unknown-android-key"
    public static let unknownWebKey: Self = "push/unknown-web-key"
    public static let unknownHeader: Self = "push/unknown-header"
    public static let unknownFrontmatterKey: Self = "push/unknown-frontmatter-key"
    public static let invalidInterruptionLevel: Self = "push/invalid-interruption-level"
    /// Android `priority` not `normal`/`high`, or `apns-priority` not 1, 5 or 10.
    public static let invalidPriority: Self = "push/invalid-priority"
    public static let invalidPushType: Self = "push/invalid-push-type"
    public static let collapseIDTooLong: Self = "push/collapse-id-too-long"
    public static let invalidExpiration: Self = "push/invalid-expiration"
    /// Warning: a literal `apns-expiration` number is a UNIX epoch in the past (often seconds meant as a
    /// duration: write `"1h"`).
    public static let implausibleExpiration: Self = "push/implausible-expiration"
    /// *Warning* (`norq lint`): a sample's string does not match the `format` its schema declares.
    public static let templateDataFormat: Self = "template/data-format"
    /// `headers.apns-topic` is not a bundle identifier.
    public static let invalidTopic: Self = "push/invalid-topic"
    /// A frontmatter value has the wrong type (e.g. `badge: many`).
    public static let invalidFrontmatterValue: Self = "push/invalid-frontmatter-value"
    /// A loc key and its literal counterpart are both set (`loc-key` with a body, `title-loc-key` with a title...).
    public static let conflictingLocKey: Self = "push/conflicting-loc-key"
    public static let invalidRelevanceScore: Self = "push/invalid-relevance-score"
    public static let invalidLiveActivityEvent: Self = "push/invalid-live-activity-event"
    public static let invalidSound: Self = "push/invalid-sound"
}
