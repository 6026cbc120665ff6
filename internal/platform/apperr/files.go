package apperr

// Error codes of file uploads, file access and audio. Like the other codes
// they are part of the wire contract.
const (
	CodeNoFileUploaded       = "no_file_uploaded"
	CodeTooManyFiles         = "too_many_files"
	CodeFilenameNotExists    = "filename_not_exists_error"
	CodeFileTooLarge         = "file_too_large"
	CodeFileNotFound         = "file_not_found"
	CodeFileAccessDenied     = "file_access_denied"
	CodeSpeechToTextDisabled = "speech_to_text_disabled"
	CodeNoAudioUploaded      = "no_audio_uploaded"
	CodeAudioTooLarge        = "audio_too_large"
	CodeUnsupportedAudioType = "unsupported_audio_type"
)

// CodeExtensionBlocked refuses an upload whose extension the app blocks.
const CodeExtensionBlocked = "file_extension_blocked"
